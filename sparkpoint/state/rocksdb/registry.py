"""The state registry inside a subtask's RocksDB: the state id and meta of every state.

A record ``REGISTRY_PREFIX + name -> JSON {"id": state id, "meta": RegisteredStateMeta}``
per state makes every database, the live one or one downloaded from a checkpoint, describe
its own contents. Data keys carry the 2-byte state id (``local_db``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import rocksdict

from sparkpoint.errors import SparkpointError
from sparkpoint.state.rocksdb.local_db import REGISTRY_END, REGISTRY_PREFIX
from sparkpoint.state.table import RegisteredStateMeta

__all__ = ["next_state_id", "read_registry", "registry_record"]

_MAX_STATE_ID = 0xFFFF


def read_registry(db: rocksdict.Rdict) -> dict[str, tuple[int, RegisteredStateMeta]]:
    """Every state registered in ``db``: name -> (state id, meta)."""
    read_opt = rocksdict.ReadOptions()
    read_opt.set_iterate_upper_bound(REGISTRY_END)
    out: dict[str, tuple[int, RegisteredStateMeta]] = {}
    for _key, raw in db.items(from_key=REGISTRY_PREFIX, read_opt=read_opt):
        record = json.loads(bytes(raw).decode("utf-8"))
        meta = RegisteredStateMeta.from_json(record["meta"])
        out[meta.name] = (int(record["id"]), meta)
    return out


def registry_record(state_id: int, meta: RegisteredStateMeta) -> tuple[bytes, bytes]:
    """The ``(key, value)`` that registers ``meta`` under ``state_id``."""
    record = json.dumps({"id": state_id, "meta": meta.to_json()}).encode("utf-8")
    return REGISTRY_PREFIX + meta.name.encode("utf-8"), record


def next_state_id(used: Iterable[int]) -> int:
    """A state id above every id in ``used`` (ids are two bytes in data keys)."""
    state_id = max(used, default=0) + 1
    if state_id > _MAX_STATE_ID:
        raise SparkpointError(f"More than {_MAX_STATE_ID} keyed states in one operator")
    return state_id
