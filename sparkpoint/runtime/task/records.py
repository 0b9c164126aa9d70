"""How records travel between Spark stages: rows of groups, one row per group.

Every row of a stage's output is ``(sub, kind, payload)``: ``sub`` is the subtask of the next
stage that must receive it, ``kind`` says what the payload is. Data rows carry a whole group of
records (values and timestamps) serialised in one go, so Spark moves a few large binary
objects per task instead of one pickled record at a time.
"""

from __future__ import annotations

import pickle
from typing import Any

__all__ = [
    "KIND_DATA",
    "KIND_META",
    "KIND_REPORT",
    "Batch",
    "decode_data",
    "encode_data",
]

KIND_DATA = 0  # bytes: a group of records for the next stage
KIND_META = 1  # dict: per-split watermarks, broadcast to every subtask of the next stage
KIND_REPORT = 2  # TaskReport: passed through later stages to the driver

# A batch is (values, timestamps); timestamps is None when no record carries one.
Batch = tuple[list[Any], list[int | None] | None]


def encode_data(values: list[Any], timestamps: list[int | None] | None) -> bytes:
    """Serialise a group of records (protocol 5 pickle of two lists: one call per group)."""
    return pickle.dumps((values, timestamps), protocol=pickle.HIGHEST_PROTOCOL)


def decode_data(payload: bytes) -> Batch:
    """Inverse of ``encode_data``."""
    values, timestamps = pickle.loads(payload)
    return values, timestamps
