"""``sparkpoint savepoint dump``: the keyed state of a savepoint as Parquet, one file per operator.

Rows follow ``sparkpoint.state.savepoint_format.SAVEPOINT_TABLE_SCHEMA`` (operator, subtask,
state name and kind, key group, serialized key / user key / value, TTL timestamp), so Spark
or pandas can read a savepoint as a table. Full checkpoints work as well; incremental
(RocksDB native) checkpoints cannot be read as tables and are refused with a clear error.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from sparkpoint.checkpoint.discovery import load_pointer
from sparkpoint.checkpoint.metadata import CheckpointMetadata, OperatorState
from sparkpoint.cli.text import printable
from sparkpoint.fs import get_filesystem
from sparkpoint.state.savepoint_format import operator_table

__all__ = ["add_arguments", "dump_savepoint", "parquet_file_name"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def parquet_file_name(operator_id: str) -> str:
    """A file name for ``operator_id``'s table (unsafe characters become ``_``)."""
    return (_UNSAFE.sub("_", operator_id) or "operator") + ".parquet"


def _keyed_operators(metadata: CheckpointMetadata) -> list[OperatorState]:
    return [
        op
        for op in metadata.operator_states
        if any(sub.managed_keyed_state for sub in op.subtask_states.values())
    ]


def _write_table(table: pa.Table, output: str, name: str) -> str:
    fs = get_filesystem(output)
    fs.mkdirs(output)
    path = fs.join(output, name)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    fs.write_atomic(path, sink.getvalue().to_pybytes(), overwrite=True)
    return path


def dump_savepoint(
    pointer: str, output: str, operator_id: str | None = None
) -> list[tuple[str, int, str]]:
    """Write each keyed operator's state to ``<output>/<operator>.parquet``.

    Returns ``(operator_id, rows, path)`` per file written. Raises ``ValueError`` when
    ``operator_id`` is given but holds no keyed state in the snapshot.
    """
    metadata, location = load_pointer(pointer)
    operators = _keyed_operators(metadata)
    if operator_id is not None:
        chosen = [op for op in operators if op.operator_id == operator_id]
        if not chosen:
            known = ", ".join(op.operator_id for op in operators) or "none"
            raise ValueError(
                f"Operator {operator_id!r} has no keyed state in {location.external_pointer} "
                f"(operators with keyed state: {known})"
            )
        operators = chosen
    tables = [(op.operator_id, operator_table(op)) for op in operators]  # read all, then write
    return [
        (op_id, table.num_rows, _write_table(table, output, parquet_file_name(op_id)))
        for op_id, table in tables
    ]


def _cmd_dump(args: argparse.Namespace) -> int:
    written = dump_savepoint(args.pointer, args.output, args.operator)
    if not written:
        print(f"No keyed state in {printable(args.pointer)}; nothing written")
        return 0
    for op, rows, path in written:
        print(f"{printable(op)}: {rows} rows -> {printable(path)}")
    return 0


def add_arguments(actions: Any) -> None:
    """Register ``dump`` on the ``savepoint`` subparsers."""
    p = actions.add_parser("dump", help="write a savepoint's keyed state to Parquet")
    p.add_argument("pointer", help="savepoint/checkpoint directory or its _metadata file")
    p.add_argument("--output", "-o", required=True, help="directory (or URI) for the files")
    p.add_argument("--operator", default=None, help="dump only this operator id")
    p.set_defaults(handler=_cmd_dump)
