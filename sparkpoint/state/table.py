"""The small storage interface every keyed backend implements, one ``StateTable`` per state.

The state objects (``primitives.py``) are written once, over this interface, so heap and
RocksDB share every semantic (TTL included). A table stores, per key group and key:

* VALUE / REDUCING / AGGREGATING: one *stored value* (the user value, or ``TtlValue``);
* LIST: a Python ``list`` of stored elements (each the element, or ``TtlValue``);
* MAP: entries ``user_key -> stored value`` (RocksDB keeps them as composite keys).

``RegisteredStateMeta`` turns stored objects into the *canonical bytes* that snapshots,
savepoints and restores exchange (``iter_entries_bytes`` / ``put_entry_bytes``):

* key bytes = ``key_serializer.serialize(key)``; user-key bytes (MAP only) likewise;
* VALUE/REDUCING/AGGREGATING value bytes = [int64 BE last-access ms, if TTL] + value;
* LIST value bytes = concatenation over elements of ([int64 ts, if TTL] + element), so
  appending is concatenation (a RocksDB merge operator may rely on it);
* MAP value bytes = [int64 ts, if TTL] + null flag byte (0 = None, 1 = value) + value.
"""

from __future__ import annotations

import abc
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from sparkpoint.errors import RestoreError, StateDecodeError, UntrustedSnapshotError
from sparkpoint.state.descriptors import StateDescriptor, StateKind
from sparkpoint.state.serializers import Buffer, TypeSerializer, serializer_from_config

__all__ = ["MISSING", "RegisteredStateMeta", "StateTable", "TtlValue"]


class _Missing:
    """Sentinel type for an absent map entry (map values may be ``None``)."""

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()

_TS = struct.Struct(">q")
_SINGLE = frozenset({StateKind.VALUE, StateKind.REDUCING, StateKind.AGGREGATING})
# What a serializer raises for bytes it cannot read.
_DECODE_ERRORS = (ValueError, struct.error, IndexError, OverflowError, TypeError, EOFError)


class _Named:
    """A decoder whose failures are ``StateDecodeError`` naming the state (picklable, so
    meta infos still ship to Spark's workers)."""

    __slots__ = ("decode", "state", "what")

    def __init__(self, decode: Callable[[Any], Any], state: str, what: str) -> None:
        self.decode, self.state, self.what = decode, state, what

    def __call__(self, data: Any) -> Any:
        try:
            return self.decode(data)
        except StateDecodeError:
            raise
        except _DECODE_ERRORS as e:
            raise StateDecodeError(
                f"State {self.state!r}: a {self.what} of {len(data)} bytes that its serializer "
                f"cannot read ({type(e).__name__}: {e})"
            ) from None

    def __reduce__(self) -> tuple[Any, ...]:
        return _Named, (self.decode, self.state, self.what)


def _named(decode: Callable[[Any], Any], state: str, what: str) -> _Named:
    return _Named(decode, state, what)


class TtlValue(NamedTuple):
    """A user value with the time (ms) it was last written or, per config, read."""

    value: Any
    timestamp: int


@dataclass(frozen=True)
class RegisteredStateMeta:
    """What a backend knows about one registered state, and its canonical byte encoding."""

    name: str
    kind: StateKind
    key_serializer: TypeSerializer
    value_serializer: TypeSerializer
    user_key_serializer: TypeSerializer | None = None
    ttl: bool = False

    @staticmethod
    def from_descriptor(
        desc: StateDescriptor, key_serializer: TypeSerializer
    ) -> RegisteredStateMeta:
        """The meta info of ``desc`` under ``key_serializer``."""
        from sparkpoint.state.descriptors import ListStateDescriptor, MapStateDescriptor

        user_key = None
        if isinstance(desc, ListStateDescriptor):
            value = desc.elem_type_info.get_serializer()
        elif isinstance(desc, MapStateDescriptor):
            value = desc.value_type_info.get_serializer()
            user_key = desc.key_type_info.get_serializer()
        else:
            value = desc.type_info.get_serializer()
        return RegisteredStateMeta(
            desc.name, desc.kind, key_serializer, value, user_key, desc.ttl_enabled
        )

    def to_json(self) -> dict[str, Any]:
        """JSON form recorded in snapshot and savepoint headers."""
        return {
            "name": self.name,
            "kind": self.kind.value,
            "key_serializer": self.key_serializer.snapshot_config(),
            "value_serializer": self.value_serializer.snapshot_config(),
            "user_key_serializer": (
                None
                if self.user_key_serializer is None
                else self.user_key_serializer.snapshot_config()
            ),
            "ttl": self.ttl,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> RegisteredStateMeta:
        """Inverse of ``to_json``; ``ValueError`` for a record no release writes (a MAP
        state without its map-key serializer, or one with it for another kind)."""
        uk = data.get("user_key_serializer")
        if (uk is None) == (StateKind(data["kind"]) is StateKind.MAP):
            raise ValueError(f"state {data['name']!r} of kind {data['kind']} with map keys {uk!r}")
        return RegisteredStateMeta(
            data["name"],
            StateKind(data["kind"]),
            serializer_from_config(data["key_serializer"]),
            serializer_from_config(data["value_serializer"]),
            None if uk is None else serializer_from_config(uk),
            bool(data.get("ttl", False)),
        )

    def same_layout(self, other: RegisteredStateMeta) -> bool:
        """Whether both encode entries identically (no migration needed)."""
        return self.to_json() == other.to_json()

    def check_declared(self, declared: RegisteredStateMeta) -> None:
        """Refuse restored entries of this (snapshot) layout whose keys, map keys or values
        the snapshot says are pickled where the job declares them typed: a header must not
        turn typed columns into code. Checked before any entry is converted."""
        parts = (
            ("keys", self.key_serializer, declared.key_serializer),
            ("values", self.value_serializer, declared.value_serializer),
            ("map keys", self.user_key_serializer, declared.user_key_serializer),
        )
        for part, restored, wanted in parts:
            if restored is None or wanted is None:
                continue
            old, new = restored.snapshot_config(), wanted.snapshot_config()
            if _pickled(old) and not _pickled(new):
                raise UntrustedSnapshotError(
                    f"State {self.name!r} is declared with typed {part} ({new}), but the "
                    f"snapshot being restored says they are pickled ({old}): refusing to "
                    "unpickle them (a snapshot cannot switch typed state to pickle). To "
                    "migrate state that really was untyped, read it with SavepointReader and "
                    "write it typed with SavepointWriter"
                )

    def check_restored_layout(self, other: RegisteredStateMeta) -> None:
        """Refuse a state that restored handles describe with other serializers than this."""
        if not self.same_layout(other):
            raise RestoreError(
                f"State {self.name!r} appears with different serializers in the restored "
                f"handles: {self.to_json()} vs {other.to_json()}"
            )

    # -- canonical bytes ---------------------------------------------------------------

    def encode_key(self, key: Any) -> bytes:
        """Key bytes."""
        return self.key_serializer.serialize(key)

    def decode_key(self, data: Buffer) -> Any:
        """Key from its bytes."""
        return self.key_serializer.deserialize(data)

    def encode_user_key(self, user_key: Any) -> bytes:
        """Map user-key bytes."""
        assert self.user_key_serializer is not None
        return self.user_key_serializer.serialize(user_key)

    def decode_user_key(self, data: Buffer) -> Any:
        """Map user key from its bytes."""
        assert self.user_key_serializer is not None
        return self.user_key_serializer.deserialize(data)

    def _write_one(self, stored: Any, out: bytearray) -> None:
        if self.ttl:
            out += _TS.pack(stored.timestamp)
            stored = stored.value
        if self.kind is StateKind.MAP:
            if stored is None:
                out.append(0)
                return
            out.append(1)
        self.value_serializer.write(stored, out)

    def _read_one(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        ts = 0
        if self.ttl:
            ts = _TS.unpack_from(buf, pos)[0]
            pos += 8
        if self.kind is StateKind.MAP:
            flag = buf[pos]
            pos += 1
            value: Any = None
            if flag:
                value, pos = self.value_serializer.read(buf, pos)
        else:
            value, pos = self.value_serializer.read(buf, pos)
        return (TtlValue(value, ts) if self.ttl else value), pos

    def __post_init__(self) -> None:
        if not self.ttl and self.kind in _SINGLE:
            # plain values: the canonical bytes are exactly the serializer's bytes
            object.__setattr__(self, "encode_value", self.value_serializer.serialize)
            object.__setattr__(
                self, "decode_value", _named(self.value_serializer.deserialize, self.name, "value")
            )
        else:
            object.__setattr__(self, "decode_value", _named(self._decode_value, self.name, "value"))
        object.__setattr__(
            self, "decode_key", _named(self.key_serializer.deserialize, self.name, "key")
        )
        if self.user_key_serializer is not None:
            object.__setattr__(
                self,
                "decode_user_key",
                _named(self.user_key_serializer.deserialize, self.name, "user key"),
            )

    def encode_value(self, stored: Any) -> bytes:
        """Canonical bytes of a stored value (a list of stored elements for LIST)."""
        out = bytearray()
        if self.kind is StateKind.LIST:
            for elem in stored:
                self._write_one(elem, out)
        else:
            self._write_one(stored, out)
        return bytes(out)

    def decode_value(self, data: Buffer) -> Any:
        """Stored value from canonical bytes (a list of stored elements for LIST);
        ``StateDecodeError`` naming the state for bytes its serializer cannot read."""
        return self._decode_value(data)  # replaced per instance in __post_init__

    def _decode_value(self, data: Buffer) -> Any:
        view = memoryview(data)
        if self.kind is StateKind.LIST:
            elems = []
            pos, end = 0, len(view)
            while pos < end:
                elem, pos = self._read_one(view, pos)
                elems.append(elem)
            return elems
        value, pos = self._read_one(view, 0)
        if pos != len(view):
            raise ValueError(f"State {self.name!r}: {len(view) - pos} trailing bytes in a value")
        return value

    def drop_expired_bytes(self, data: bytes, now: int, ttl_millis: int) -> bytes | None:
        """``data`` without expired parts (``None`` if nothing is left); for snapshot cleanup."""
        if not self.ttl:
            return data
        if self.kind is not StateKind.LIST:
            return None if _TS.unpack_from(data, 0)[0] + ttl_millis <= now else data
        kept = [e for e in self.decode_value(data) if e.timestamp + ttl_millis > now]
        return self.encode_value(kept) if kept else None

    def ttl_timestamp_of(self, data: Buffer) -> int | None:
        """The last-access timestamp in value bytes (``None`` for LIST or without TTL)."""
        if not self.ttl or self.kind is StateKind.LIST:
            return None
        return int(_TS.unpack_from(data, 0)[0])


class StateTable(abc.ABC):
    """Entries of one state in one keyed backend; see the module docstring for the model.

    Keys are Python key objects (the backend's key serializer gives their bytes). A LIST
    value returned by ``get`` must not be changed by the caller (copy it); a list given to
    ``put`` or ``append`` becomes the table's (callers pass lists they do not reuse).
    """

    def __init__(self, meta: RegisteredStateMeta) -> None:
        self.meta = meta

    # -- VALUE / LIST / REDUCING / AGGREGATING -----------------------------------------

    @abc.abstractmethod
    def get(self, key_group: int, key: Any) -> Any:
        """The stored value of ``key`` (a list for LIST), or ``None``."""

    @abc.abstractmethod
    def put(self, key_group: int, key: Any, stored: Any) -> None:
        """Replace the stored value of ``key``."""

    @abc.abstractmethod
    def delete(self, key_group: int, key: Any) -> None:
        """Remove ``key`` (all its map entries for MAP); absent is fine."""

    def append(self, key_group: int, key: Any, elements: list[Any]) -> None:
        """LIST: append stored ``elements`` to the list of ``key`` (creating it)."""
        current = self.get(key_group, key)
        self.put(key_group, key, elements if current is None else [*current, *elements])

    # -- MAP ---------------------------------------------------------------------------

    @abc.abstractmethod
    def map_get(self, key_group: int, key: Any, user_key: Any) -> Any:
        """The stored value of one map entry, or ``MISSING``."""

    @abc.abstractmethod
    def map_put(self, key_group: int, key: Any, user_key: Any, stored: Any) -> None:
        """Insert or replace one map entry."""

    @abc.abstractmethod
    def map_remove(self, key_group: int, key: Any, user_key: Any) -> None:
        """Remove one map entry; absent is fine."""

    @abc.abstractmethod
    def map_entries(self, key_group: int, key: Any) -> list[tuple[Any, Any]]:
        """All ``(user_key, stored value)`` entries of ``key`` (a new list)."""

    def map_is_empty(self, key_group: int, key: Any) -> bool:
        """Whether ``key`` has no map entry."""
        return not self.map_entries(key_group, key)

    def pop_map_entries(
        self, key_groups: Iterable[int], select: Callable[[Any], bool]
    ) -> list[tuple[int, Any, Any]]:
        """MAP: remove every entry whose user key ``select`` accepts, in ``key_groups``;
        returns their ``(key group, key, user key)``. One pass over the entries, without
        setting a current key per key (timers fire through this)."""
        meta = self.meta
        hits: list[tuple[int, Any, Any]] = []
        for kg in key_groups:
            for kb, ukb, _v in list(self.iter_entries_bytes(kg)):
                uk = meta.decode_user_key(ukb)  # type: ignore[arg-type]
                if select(uk):
                    hits.append((kg, meta.decode_key(kb), uk))
        for kg, key, uk in hits:
            self.map_remove(kg, key, uk)
        return hits

    # -- enumeration and canonical bytes -----------------------------------------------

    @abc.abstractmethod
    def keys(self) -> Iterator[Any]:
        """Every key with a value or map entry (each once)."""

    @abc.abstractmethod
    def iter_entries_bytes(self, key_group: int) -> Iterator[tuple[bytes, bytes | None, bytes]]:
        """``(key bytes, user-key bytes or None, value bytes)`` of one key group."""

    @abc.abstractmethod
    def put_entry_bytes(
        self, key_group: int, key: bytes, user_key: bytes | None, value: bytes
    ) -> None:
        """Insert one entry given in canonical bytes (restore, migration)."""

    def put_entries_bytes(
        self,
        key_group: int,
        keys: list[bytes],
        user_keys: list[bytes | None],
        values: list[bytes],
    ) -> None:
        """Bulk ``put_entry_bytes`` of one key group (restore)."""
        for k, uk, v in zip(keys, user_keys, values):
            self.put_entry_bytes(key_group, k, uk, v)

    def put_entries_arrow(self, key_group: int, keys: Any, user_keys: Any, values: Any) -> None:
        """Bulk insert of one key group from pyarrow ``binary`` arrays (restore)."""
        self.put_entries_bytes(
            key_group, keys.to_pylist(), user_keys.to_pylist(), values.to_pylist()
        )

    def put_group_objects(self, key_group: int, objects: dict[Any, Any]) -> None:
        """Bulk insert of stored objects of one key group: ``{key: stored}`` or, for MAP,
        ``{key: {user_key: stored}}`` (restore of heap checkpoints)."""
        if self.meta.kind is StateKind.MAP:
            for key, entries in objects.items():
                for uk, stored in entries.items():
                    self.map_put(key_group, key, uk, stored)
        else:
            for key, stored in objects.items():
                self.put(key_group, key, stored)

    @abc.abstractmethod
    def clear(self) -> None:
        """Remove every entry of this state."""


def _pickled(config: Any) -> bool:
    """Whether a serializer config is, or holds, the pickle serializer."""
    if config == "PICKLED_BYTE_ARRAY":
        return True
    if isinstance(config, dict):
        return any(_pickled(v) for v in config.values())
    if isinstance(config, list):
        return any(_pickled(v) for v in config)
    return False
