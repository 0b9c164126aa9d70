"""``sparkpoint savepoint dump``: the keyed state of a savepoint as Parquet, one file per operator.
``sparkpoint savepoint import-flink``: a sparkpoint savepoint from a PyFlink job's Flink
savepoint (``sparkpoint.state_processor.flink``).

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


def _load_attribute(option: str, spec: str, what: str) -> dict[str, Any]:
    """The dict named ``module:attribute`` (the module is imported from the current
    directory or the Python path: the user's own code)."""
    import importlib
    import sys

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(
            f"{option} {spec!r}: give module:attribute, e.g. my_job:STATES, naming a dict of "
            f"operator uid -> {what}"
        )
    if "" not in sys.path:
        sys.path.insert(0, "")
    value = getattr(importlib.import_module(module_name), attr, None)
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ValueError(
            f"{option} {spec!r}: {attr} must be a dict of operator uid -> {what}, got "
            f"{type(value).__name__}"
        )
    return value


def load_descriptors(spec: str) -> dict[str, list[Any]]:
    """The ``uid -> state descriptors`` mapping named ``module:attribute``."""
    value = _load_attribute("--states", spec, "list of state descriptors")
    if not all(isinstance(v, (list, tuple)) for v in value.values()):
        raise ValueError(f"--states {spec!r}: every value must be a list of state descriptors")
    return {k: list(v) for k, v in value.items()}


def _cmd_import_flink(args: argparse.Namespace) -> int:
    from sparkpoint.state_processor.flink import import_flink_savepoint

    states = load_descriptors(args.states)
    key_types = (
        None
        if args.key_types is None
        else _load_attribute("--key-types", args.key_types, "the key_by key_type")
    )
    path = import_flink_savepoint(
        args.flink_savepoint,
        args.savepoint,
        states,
        key_types=key_types,
        allow_pickle=args.allow_pickle,
        kafka_sources=tuple(args.kafka_source),
        job_name=args.job_name,
    )
    names = [*states, *args.kafka_source]
    print(f"Imported {', '.join(map(printable, names))} -> {printable(path)}")
    return 0


def add_arguments(actions: Any) -> None:
    """Register ``dump`` and ``import-flink`` on the ``savepoint`` subparsers."""
    p = actions.add_parser(
        "import-flink",
        help="write a sparkpoint savepoint from a PyFlink job's Flink savepoint",
    )
    p.add_argument("flink_savepoint", help="the Flink savepoint directory (canonical format)")
    p.add_argument("savepoint", help="the new sparkpoint savepoint directory")
    p.add_argument(
        "--states",
        required=True,
        help="module:attribute naming a dict of operator uid -> the state descriptors the "
        "operator's function registers",
    )
    p.add_argument(
        "--key-types",
        default=None,
        help="module:attribute naming a dict of operator uid -> the key_type its key_by "
        "declares (omit for untyped keys)",
    )
    p.add_argument(
        "--allow-pickle",
        action="store_true",
        help="load pickled keys and values that name classes or functions (runs their code); "
        "without it only plain-data pickles load",
    )
    p.add_argument(
        "--kafka-source",
        action="append",
        default=[],
        metavar="UID",
        help="the uid of a KafkaSource whose split offsets to import (repeatable)",
    )
    p.add_argument(
        "--job-name",
        default=None,
        help="the sparkpoint job's name, recorded with the source offsets (needed when a "
        "signing key is configured)",
    )
    p.set_defaults(handler=_cmd_import_flink)
    p = actions.add_parser("dump", help="write a savepoint's keyed state to Parquet")
    p.add_argument("pointer", help="savepoint/checkpoint directory or its _metadata file")
    p.add_argument("--output", "-o", required=True, help="directory (or URI) for the files")
    p.add_argument("--operator", default=None, help="dump only this operator id")
    p.set_defaults(handler=_cmd_dump)
