"""How records travel between Spark stages: Arrow batches of groups, one row per group.

Every row of a stage's output is ``(sub, kind, payload)``: ``sub`` is the subtask of the next
stage that must receive it, ``kind`` says what the payload is. Data rows carry a whole group of
records (values and timestamps) serialised in one go, so Spark moves a few large binary cells
per task instead of one pickled row per record.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

__all__ = [
    "KIND_DATA",
    "KIND_META",
    "KIND_REPORT",
    "ROW_SCHEMA",
    "ROW_SCHEMA_DDL",
    "Batch",
    "decode_data",
    "encode_data",
    "rows_to_arrow",
]

KIND_DATA = 0  # a group of records for the next stage
KIND_META = 1  # per-split watermarks, broadcast to every subtask of the next stage
KIND_REPORT = 2  # a task's TaskReport, passed through later stages to the driver

ROW_SCHEMA = pa.schema([("sub", pa.int32()), ("kind", pa.int8()), ("payload", pa.binary())])
ROW_SCHEMA_DDL = "sub int, kind byte, payload binary"

# A batch is (values, timestamps); timestamps is None when no record carries one.
Batch = tuple[list[Any], list[int | None] | None]


def encode_data(values: list[Any], timestamps: list[int | None] | None) -> bytes:
    """Serialise a group of records (protocol 5 pickle of two lists: one call per group)."""
    return pickle.dumps((values, timestamps), protocol=pickle.HIGHEST_PROTOCOL)


def decode_data(payload: bytes) -> Batch:
    """Inverse of ``encode_data``."""
    values, timestamps = pickle.loads(payload)
    return values, timestamps


def rows_to_arrow(rows: list[tuple[int, int, bytes]]) -> pa.RecordBatch:
    """Build an output batch in ``ROW_SCHEMA`` from ``(sub, kind, payload)`` tuples."""
    subs, kinds, payloads = zip(*rows) if rows else ((), (), ())
    return pa.RecordBatch.from_arrays(
        [
            pa.array(subs, pa.int32()),
            pa.array(kinds, pa.int8()),
            pa.array(payloads, pa.binary()),
        ],
        schema=ROW_SCHEMA,
    )


def iter_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, int, bytes]]:
    """The ``(sub, kind, payload)`` rows of incoming Arrow batches."""
    for batch in batches:
        subs = batch.column(0).to_pylist()
        kinds = batch.column(1).to_pylist()
        payloads = batch.column(2).to_pylist()
        yield from zip(subs, kinds, payloads)
