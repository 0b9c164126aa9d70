"""How keyed state becomes typed columns: one column per state (wide) or one row per entry
(long), decoded from the canonical byte columns of each key group.

A ``StateColumn`` is built on the driver from a state's meta info (and an optional type hint
for pickled values) and shipped to the executors with the ``StateDecoder``, which turns the
key groups of a split into Arrow record batches. Plain Python; no Spark.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from sparkpoint.state import typeinfo as ti
from sparkpoint.state.column_codecs import decode_column
from sparkpoint.state.descriptors import StateKind
from sparkpoint.state.serializers import TypeSerializer, serializer_from_config
from sparkpoint.state.snapshot_format import Columns
from sparkpoint.state.table import RegisteredStateMeta
from sparkpoint.state_processor.snapshot_reading import KeyGroupEntries
from sparkpoint.state_processor.type_mapping import (
    PICKLED_METADATA,
    arrow_type,
    column_configs,
    state_column_type,
    to_arrow,
    type_info_from_config,
)

__all__ = ["KeyColumn", "StateColumn", "StateDecoder"]

_SINGLE = (StateKind.VALUE, StateKind.REDUCING, StateKind.AGGREGATING)


def _config(info: ti.TypeInformation | None) -> Any:
    return None if info is None else info.get_serializer().snapshot_config()


@dataclass(frozen=True)
class KeyColumn:
    """The key column: how keys are decoded and typed."""

    decode: Any  # serializer config keys are decoded with
    column: Any  # serializer config of the column type
    raw: bool  # values are pickle bytes

    @staticmethod
    def of(recorded: Any, hint: ti.TypeInformation | None) -> KeyColumn:
        """Keys recorded with serializer config ``recorded``, typed by ``hint`` if pickled."""
        return KeyColumn(*column_configs(recorded, _config(hint), "The key"))

    @property
    def type_info(self) -> ti.TypeInformation:
        """Type information of the column."""
        return type_info_from_config(self.column)


@dataclass(frozen=True)
class StateColumn:
    """One state as a column: VALUE-like states hold the value, LIST states a list, MAP states
    a map (wide form); the long form has a row per key (per map entry for MAP)."""

    name: str
    kind: StateKind
    ttl: bool
    value_decode: Any  # serializer config of a value (LIST: element)
    value_column: Any
    user_key_decode: Any = None  # MAP only
    user_key_column: Any = None
    raw: bool = False

    @staticmethod
    def of(meta: RegisteredStateMeta, hint: ti.TypeInformation | None = None) -> StateColumn:
        """The column of ``meta``; ``hint`` types pickled values: the column's type, i.e.
        ``Types.LIST(elem)`` for a LIST state and ``Types.MAP(k, v)`` for a MAP state."""
        what = f"State {meta.name!r}"
        value = meta.value_serializer.snapshot_config()
        h = _config(hint)
        if meta.kind is StateKind.LIST:
            h = _part(h, "LIST", "element", what)
        if meta.kind is StateKind.MAP:
            assert meta.user_key_serializer is not None
            uk = meta.user_key_serializer.snapshot_config()
            ukd, ukc, uk_raw = column_configs(uk, _part(h, "MAP", "key", what), what)
            vd, vc, v_raw = column_configs(value, _part(h, "MAP", "value", what), what)
            return StateColumn(meta.name, meta.kind, meta.ttl, vd, vc, ukd, ukc, uk_raw or v_raw)
        vd, vc, raw = column_configs(value, h, what)
        return StateColumn(meta.name, meta.kind, meta.ttl, vd, vc, raw=raw)

    @property
    def value_type(self) -> ti.TypeInformation:
        """Type of one value (LIST: one element; MAP: one map value)."""
        return type_info_from_config(self.value_column)

    @property
    def user_key_type(self) -> ti.TypeInformation | None:
        """Type of a map key (MAP only)."""
        return None if self.user_key_column is None else type_info_from_config(self.user_key_column)

    @property
    def type_info(self) -> ti.TypeInformation:
        """Type of the wide-form column."""
        return state_column_type(self.kind, self.value_type, self.user_key_type)

    def decode_meta(self, key: TypeSerializer) -> RegisteredStateMeta:
        """A meta info whose ``decode_value`` yields values as the column holds them."""
        uk = None if self.user_key_decode is None else serializer_from_config(self.user_key_decode)
        return RegisteredStateMeta(
            self.name, self.kind, key, serializer_from_config(self.value_decode), uk, self.ttl
        )


def _part(hint: Any, kind: str, part: str, what: str) -> Any:
    if hint is None:
        return None
    if not isinstance(hint, dict) or hint.get("type") != kind:
        raise ValueError(
            f"{what} is a {kind} state: its type hint must be Types.{kind}(...), got {hint}"
        )
    return hint[part]


def _field(name: str, info: ti.TypeInformation, raw: bool) -> pa.Field:
    meta = {PICKLED_METADATA: "true"} if raw else None
    return pa.field(name, arrow_type(info), metadata=meta)


class StateDecoder:
    """Turns the key groups of a split into record batches of ``schema`` (picklable)."""

    def __init__(
        self,
        key: KeyColumn,
        states: Sequence[StateColumn],
        form: str = "wide",
        key_name: str = "key",
    ) -> None:
        if form not in ("wide", "long"):
            raise ValueError(f"form must be 'wide' or 'long', got {form!r}")
        if not states:
            raise ValueError("No state to read")
        self.key = key
        self.states = list(states)
        self.form = form
        self.key_name = key_name
        names = [s.name for s in self.states]
        if form == "wide" and key_name in names:
            raise ValueError(
                f"A state is called {key_name!r} like the key column; pass another key column name"
            )
        if form == "long":
            self._check_long()

    def _check_long(self) -> None:
        first = self.states[0]
        for s in self.states[1:]:
            if (_long_value_type(s), s.user_key_column) != (
                _long_value_type(first),
                first.user_key_column,
            ):
                raise ValueError(
                    f"States {first.name!r} and {s.name!r} have different value types "
                    f"({_config(first.type_info)} vs {_config(s.type_info)}): the long form "
                    "needs one value type; select states of one type or read the wide form"
                )

    @property
    def schema(self) -> pa.Schema:
        """The schema of every batch."""
        key = _field(self.key_name, self.key.type_info, self.key.raw)
        if self.form == "wide":
            return pa.schema([key, *(_field(s.name, s.type_info, s.raw) for s in self.states)])
        first = self.states[0]
        raw = any(s.raw for s in self.states)
        uk = first.user_key_type
        return pa.schema(
            [
                key,
                pa.field("state_name", pa.string(), nullable=False),
                _field("user_key", uk if uk is not None else ti.BasicTypeInfo("STRING"), raw),
                _field("value", _long_value_type(first), raw),
            ]
        )

    def batches(self, groups: Iterator[KeyGroupEntries]) -> Iterator[pa.RecordBatch]:
        """One record batch per non-empty key group (of the selected states)."""
        key_ser = serializer_from_config(self.key.decode)
        metas = {s.name: (s, s.decode_meta(key_ser)) for s in self.states}
        for _kg, entries in groups:
            present = [(metas[name], cols) for name, (_, cols) in entries.items() if name in metas]
            if not present:
                continue
            if self.form == "wide":
                yield self._wide(present, key_ser)
            else:
                yield self._long(present, key_ser)

    # -- wide ---------------------------------------------------------------------------

    def _wide(
        self,
        present: list[tuple[tuple[StateColumn, RegisteredStateMeta], Columns]],
        key_ser: TypeSerializer,
    ) -> pa.RecordBatch:
        if (
            len(present) == 1
            and len(self.states) == 1
            and present[0][0][0].kind is not (StateKind.MAP)
        ):
            (col, meta), (keys, _, vals) = present[0]
            return pa.record_batch(
                [self._keys(_binary(keys)), to_arrow(_values(col, meta, vals), col.type_info)],
                schema=self.schema,
            )
        index: dict[bytes, int] = {}
        by_state: dict[str, dict[int, Any]] = {}
        for (col, meta), (keys, uks, vals) in present:
            values = _values(col, meta, vals)
            slot: dict[int, Any] = {}
            key_list = _pylist(keys)
            if col.kind is StateKind.MAP:
                user_keys = _user_keys(col, meta, uks)
                for kb, uk, v in zip(key_list, user_keys, values):
                    i = index.setdefault(kb, len(index))
                    slot.setdefault(i, {})[uk] = v
            else:
                for kb, v in zip(key_list, values):
                    slot[index.setdefault(kb, len(index))] = v
            by_state[col.name] = slot
        n = len(index)
        arrays = [self._keys(pa.array(list(index), pa.binary()))]
        for col in self.states:
            slot = by_state.get(col.name, {})
            arrays.append(to_arrow([slot.get(i) for i in range(n)], col.type_info))
        return pa.record_batch(arrays, schema=self.schema)

    def _keys(self, key_bytes: pa.Array) -> pa.Array:
        ser = serializer_from_config(self.key.decode)
        return to_arrow(decode_column(ser, key_bytes), self.key.type_info)

    # -- long ---------------------------------------------------------------------------

    def _long(
        self,
        present: list[tuple[tuple[StateColumn, RegisteredStateMeta], Columns]],
        key_ser: TypeSerializer,
    ) -> pa.RecordBatch:
        keys_out: list[pa.Array] = []
        names: list[str] = []
        uks_out: list[Any] = []
        vals_out: list[Any] = []
        for (col, meta), (keys, uks, vals) in present:
            n = len(keys)
            keys_out.append(_binary(keys))
            names.extend([col.name] * n)
            uks_out.extend(_user_keys(col, meta, uks) if col.kind is StateKind.MAP else [None] * n)
            vals_out.extend(_values(col, meta, vals))
        first = self.states[0]
        key_bytes = keys_out[0] if len(keys_out) == 1 else pa.concat_arrays(keys_out)
        uk_type = first.user_key_type or ti.BasicTypeInfo("STRING")
        return pa.record_batch(
            [
                self._keys(key_bytes),
                pa.array(names, pa.string()),
                to_arrow(uks_out, uk_type),
                to_arrow(vals_out, _long_value_type(first)),
            ],
            schema=self.schema,
        )


def _long_value_type(col: StateColumn) -> ti.TypeInformation:
    """The long form's value column: the value (LIST: the list; MAP: one map value)."""
    return col.value_type if col.kind is StateKind.MAP else col.type_info


def _binary(values: Any) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks()
    return values if isinstance(values, pa.Array) else pa.array(values, pa.binary())


def _pylist(values: Any) -> list[bytes]:
    return values.to_pylist() if isinstance(values, pa.Array | pa.ChunkedArray) else values


def _values(col: StateColumn, meta: RegisteredStateMeta, vals: Any) -> list[Any]:
    """The values of canonical value bytes, without TTL timestamps."""
    if col.kind in _SINGLE and not col.ttl:
        return decode_column(meta.value_serializer, _binary(vals))
    decode = meta.decode_value
    out = [decode(v) for v in _pylist(vals)]
    if not col.ttl:
        return out
    if col.kind is StateKind.LIST:
        return [[e.value for e in v] for v in out]
    return [v.value for v in out]


def _user_keys(col: StateColumn, meta: RegisteredStateMeta, uks: Any) -> list[Any]:
    assert meta.user_key_serializer is not None
    return decode_column(meta.user_key_serializer, _binary(uks))
