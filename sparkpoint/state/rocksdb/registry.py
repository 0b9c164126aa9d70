"""The state registry inside a subtask's RocksDB: the state id, meta and entry layout of
every state.

A record ``REGISTRY_PREFIX + name -> JSON {"id": state id, "meta": RegisteredStateMeta,
"layout": "timers" (absent: the standard layout)}`` per state makes every database, the live
one or one downloaded from a checkpoint, describe its own contents. Data keys carry the
2-byte state id (``local_db``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import NamedTuple

import rocksdict

from sparkpoint.checkpoint.json_nesting import check_json_nesting
from sparkpoint.errors import CorruptStateError, SparkpointError
from sparkpoint.state.rocksdb.local_db import REGISTRY_END, REGISTRY_PREFIX
from sparkpoint.state.table import RegisteredStateMeta

__all__ = ["RegisteredState", "next_state_id", "read_registry", "registry_record"]

_MAX_STATE_ID = 0xFFFF


class RegisteredState(NamedTuple):
    """One registry record: where a state's entries are and how they are laid out."""

    state_id: int
    meta: RegisteredStateMeta
    layout: str | None  # None: ``RocksDBStateTable``'s; "timers": ``RocksDBTimerTable``'s


def read_registry(db: rocksdict.Rdict) -> dict[str, RegisteredState]:
    """Every state registered in ``db``, by name."""
    read_opt = rocksdict.ReadOptions()
    read_opt.set_iterate_upper_bound(REGISTRY_END)
    out: dict[str, RegisteredState] = {}
    for key, raw in db.items(from_key=REGISTRY_PREFIX, read_opt=read_opt):
        try:  # restored databases come from snapshots: a record may be anything
            check_json_nesting(raw)
            record = json.loads(bytes(raw).decode("utf-8"))
            meta = RegisteredStateMeta.from_json(record["meta"])
            out[meta.name] = RegisteredState(int(record["id"]), meta, record.get("layout"))
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptStateError(
                f"Corrupt RocksDB state registry record {key!r}: {type(e).__name__}: {e}"
            ) from None
    return out


def registry_record(
    state_id: int, meta: RegisteredStateMeta, layout: str | None = None
) -> tuple[bytes, bytes]:
    """The ``(key, value)`` that registers ``meta`` under ``state_id``."""
    body: dict[str, object] = {"id": state_id, "meta": meta.to_json()}
    if layout is not None:
        body["layout"] = layout
    return REGISTRY_PREFIX + meta.name.encode("utf-8"), json.dumps(body).encode("utf-8")


def next_state_id(used: Iterable[int]) -> int:
    """A state id above every id in ``used`` (ids are two bytes in data keys)."""
    state_id = max(used, default=0) + 1
    if state_id > _MAX_STATE_ID:
        raise SparkpointError(f"More than {_MAX_STATE_ID} keyed states in one operator")
    return state_id
