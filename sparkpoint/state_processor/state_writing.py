"""Writing keyed state from DataFrame rows: encoding, and one key-groups snapshot per subtask.

Two steps run on the executors. ``RowEncoder`` (where the rows are) turns each row into its
key group, target subtask and canonical bytes: the key, and per state the value bytes (a
list of ``(user key, value)`` byte pairs for MAP state), null where the key has no value.
Spark then moves the rows to their subtask and sorts them by key group, and
``SubtaskWriter`` writes the subtask's key groups as one savepoint stream (the snapshot
format every backend restores) through the checkpoint stream factory of the target
directory, returning the handle. Plain Python; no Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkpoint.checkpoint.fs_location import FsCheckpointStorageLocation
from sparkpoint.checkpoint.handles import KeyGroupsStateHandle
from sparkpoint.checkpoint.storage import CheckpointStorageLocationReference
from sparkpoint.state import pickling
from sparkpoint.state import typeinfo as ti
from sparkpoint.state.backend import SnapshotType
from sparkpoint.state.column_codecs import encode_column
from sparkpoint.state.descriptors import StateKind
from sparkpoint.state.key_groups import KeyGroupAssigner, compute_key_group_range_for_operator_index
from sparkpoint.state.serializers import BytesSerializer
from sparkpoint.state.snapshot_format import (
    Columns,
    SnapshotHeader,
    arrow_block,
    write_key_groups_snapshot,
)
from sparkpoint.state.table import RegisteredStateMeta, TtlValue
from sparkpoint.state_processor.type_mapping import (
    from_arrow,
    raw_pickle_config,
    type_info_from_config,
)

__all__ = [
    "ENTRY_TYPE",
    "RowEncoder",
    "SavepointTarget",
    "StateInput",
    "SubtaskWriter",
]

ENTRY_TYPE = pa.list_(pa.struct([pa.field("k", pa.binary()), pa.field("v", pa.binary())]))
"""The encoded column of a MAP state: its entries as (user key bytes, value bytes)."""


@dataclass(frozen=True)
class SavepointTarget:
    """Where state files go: the savepoint directory, with the inline threshold."""

    path: str
    file_state_size_threshold: int
    write_buffer_size: int

    def stream_factory(self) -> FsCheckpointStorageLocation:
        """The location (and stream factory) of the savepoint directory; state files are
        recorded relative to it, small streams inline."""
        from sparkpoint.fs import get_filesystem

        return FsCheckpointStorageLocation(
            get_filesystem(self.path),
            self.path,
            self.path,
            self.path,
            CheckpointStorageLocationReference.for_path(self.path),
            self.file_state_size_threshold,
            self.write_buffer_size,
        )


@dataclass(frozen=True)
class StateInput:
    """One state written from one column; JSON configs only, so that it pickles (serializer
    objects do not)."""

    meta: dict[str, Any]  # RegisteredStateMeta.to_json(), as the snapshot header records it
    raw: bool  # the column holds pickle bytes (read from untyped state): stored as they are
    column_type: Any  # serializer config of how column values become objects; None: plain

    def header_meta(self) -> RegisteredStateMeta:
        """The meta info the snapshot header records."""
        return RegisteredStateMeta.from_json(self.meta)

    def encoding_meta(self) -> RegisteredStateMeta:
        """The meta info that encodes the column's values: pickled parts taken as given
        bytes when ``raw`` (the bytes are identical to pickling the unpickled objects)."""
        if not self.raw:
            return self.header_meta()
        m = dict(self.meta)
        m["value_serializer"] = raw_pickle_config(m["value_serializer"])
        if m.get("user_key_serializer") is not None:
            m["user_key_serializer"] = raw_pickle_config(m["user_key_serializer"])
        return RegisteredStateMeta.from_json(m)

    def column_info(self) -> ti.TypeInformation | None:
        """Type information of the column values (``None``: plain objects)."""
        return None if self.column_type is None else type_info_from_config(self.column_type)


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class RowEncoder:
    """Step 1: rows ``(key, state columns...)`` -> ``(sub, kg, key bytes, state bytes...)``."""

    def __init__(
        self,
        uid: str,
        states: Sequence[StateInput],
        key_raw: bool,
        key_type: Any,
        max_parallelism: int,
        parallelism: int,
        now_ms: int,
    ) -> None:
        self.uid = uid
        self.states = list(states)
        self.key_raw = key_raw
        self.key_type = key_type  # serializer config of the key objects, or None: plain
        self.max_parallelism = max_parallelism
        self.parallelism = parallelism
        self.now_ms = now_ms

    @property
    def schema(self) -> pa.Schema:
        """Schema of the encoded rows."""
        fields = [
            pa.field("sub", pa.int32()),
            pa.field("kg", pa.int32()),
            pa.field("key", pa.binary()),
        ]
        for i, s in enumerate(self.states):
            is_map = s.meta["kind"] == StateKind.MAP.value
            fields.append(pa.field(f"s{i}", ENTRY_TYPE if is_map else pa.binary()))
        return pa.schema(fields)

    def encode(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Encode every batch (column 0 the key, column ``i + 1`` state ``i``)."""
        metas = [s.encoding_meta() for s in self.states]
        types = [s.column_info() for s in self.states]
        key_type = None if self.key_type is None else type_info_from_config(self.key_type)
        for batch in batches:
            if batch.num_rows:
                yield self._encode(batch, metas, types, key_type)

    def _encode(
        self,
        batch: pa.RecordBatch,
        metas: list[RegisteredStateMeta],
        types: list[ti.TypeInformation | None],
        key_type: ti.TypeInformation | None,
    ) -> pa.RecordBatch:
        key_col = batch.column(0)
        if key_col.null_count:
            raise ValueError(
                f"Operator {self.uid!r}: the key column has {key_col.null_count} "
                "null keys; every row needs a key"
            )
        key_ser = metas[0].key_serializer  # every state of an operator shares it
        if self.key_raw:
            raw = key_col.to_pylist()
            key_bytes = encode_column(BytesSerializer(), raw)
            keys = [pickling.loads(b, "a pickled key column") for b in raw]
        else:
            keys = from_arrow(key_col, key_type)
            key_bytes = _encode_all(
                key_ser.serialize,
                keys,
                keys,
                f"Operator {self.uid!r}: key",
                lambda v: encode_column(key_ser, v),
            )
        # the job's rule: a declared LONG/FLOAT/DOUBLE/BOOLEAN key hashes as that Java type
        assigner = KeyGroupAssigner(key_type)
        kgs = assigner.int64_key_groups(keys, self.max_parallelism)
        if kgs is None:
            kgs = np.fromiter(
                (assigner.key_group(k, self.max_parallelism) for k in keys), np.int32, len(keys)
            )
        subs = kgs.astype(np.int64) * self.parallelism // self.max_parallelism
        columns = [pa.array(subs.astype(np.int32)), pa.array(kgs.astype(np.int32)), key_bytes]
        for i, (state, meta) in enumerate(zip(self.states, metas)):
            columns.append(self._state(batch.column(i + 1), state.raw, types[i], meta, keys))
        return pa.record_batch(columns, schema=self.schema)

    def _state(
        self,
        col: pa.Array,
        raw: bool,
        column_type: ti.TypeInformation | None,
        meta: RegisteredStateMeta,
        keys: list[Any],
    ) -> pa.Array:
        what = f"Operator {self.uid!r}, state {meta.name!r}:"
        values = col.to_pylist() if raw else from_arrow(col, column_type)
        kind = meta.kind
        now = self.now_ms
        if kind is StateKind.MAP:
            return self._map(values, meta, keys, what)
        if kind is StateKind.LIST:
            for v, k in zip(values, keys):
                if v is not None and any(e is None for e in v):
                    raise ValueError(
                        f"{what} the list of key {_describe(k)} holds null "
                        "elements (a ListState cannot hold null)"
                    )
            present = [i for i, v in enumerate(values) if v]  # an empty list is no state
            stored: list[Any] = [
                values[i] if not meta.ttl else [TtlValue(e, now) for e in values[i]]
                for i in present
            ]
            return _scatter(
                len(values),
                present,
                _encode_all(meta.encode_value, stored, [keys[i] for i in present], what),
            )
        present = [i for i, v in enumerate(values) if v is not None]
        if meta.ttl:
            stored = [TtlValue(values[i], now) for i in present]
            encoded = _encode_all(meta.encode_value, stored, [keys[i] for i in present], what)
        else:
            stored = values if len(present) == len(values) else [values[i] for i in present]
            ser = meta.value_serializer
            encoded = _encode_all(
                ser.serialize,
                stored,
                [keys[i] for i in present],
                what,
                lambda v: encode_column(ser, v),
            )
        return _scatter(len(values), present, encoded)

    def _map(
        self, values: list[Any], meta: RegisteredStateMeta, keys: list[Any], what: str
    ) -> pa.Array:
        out: list[Any] = []
        now = self.now_ms
        for k, entries in zip(keys, values):
            if not entries:
                out.append(None)  # an empty map is no state
                continue
            pairs = []
            for uk, v in entries.items():
                if uk is None:
                    raise ValueError(f"{what} the map of key {_describe(k)} has a null key")
                try:
                    pairs.append(
                        {
                            "k": meta.encode_user_key(uk),
                            "v": meta.encode_value(TtlValue(v, now) if meta.ttl else v),
                        }
                    )
                except (ValueError, TypeError, OverflowError) as e:
                    raise ValueError(
                        f"{what} the entry {_describe(uk)}: {_describe(v)} of key "
                        f"{_describe(k)} cannot be encoded: {e}"
                    ) from e
            out.append(pairs)
        return pa.array(out, ENTRY_TYPE)


def _encode_all(
    encode: Callable[[Any], bytes],
    values: list[Any],
    keys: list[Any],
    what: str,
    vectorised: Callable[[list[Any]], pa.Array] | None = None,
) -> pa.Array:
    """Encoded ``values`` as a binary array; a value that cannot be encoded is named with its
    key in the error."""
    try:
        if vectorised is not None:
            return vectorised(values)
        return pa.array([encode(v) for v in values], pa.binary())
    except (ValueError, TypeError, OverflowError, AttributeError):
        for v, k in zip(values, keys):
            try:
                encode(v)
            except (ValueError, TypeError, OverflowError, AttributeError) as e:
                raise ValueError(
                    f"{what} the value {_describe(v)} of key {_describe(k)} cannot be encoded: {e}"
                ) from e
        raise


def _scatter(n: int, present: list[int], encoded: pa.Array) -> pa.Array:
    """A length-``n`` binary array with ``encoded`` at ``present`` and nulls elsewhere."""
    if len(present) == n:
        return encoded
    mask = np.ones(n, dtype=bool)
    mask[present] = False
    indices = np.zeros(n, dtype=np.int64)
    indices[present] = np.arange(len(present))
    taken = encoded.take(pa.array(indices)) if len(encoded) else pa.nulls(n, pa.binary())
    return pc.if_else(pa.array(mask), pa.nulls(n, pa.binary()), taken)


class SubtaskWriter:
    """Step 2: the key-group-sorted rows of one subtask -> one savepoint stream -> handle."""

    def __init__(
        self,
        uid: str,
        states: Sequence[StateInput],
        max_parallelism: int,
        parallelism: int,
        target: SavepointTarget,
        after_write: Callable[[int], None] | None = None,
    ) -> None:
        self.uid = uid
        self.states = list(states)
        # Failure-injection hook (tests): called with the subtask after its stream is
        # written, before the task reports the handle.
        self.after_write = after_write
        self.max_parallelism = max_parallelism
        self.parallelism = parallelism
        self.target = target

    def write(self, subtask: int, batches: Iterator[pa.RecordBatch]) -> KeyGroupsStateHandle | None:
        """Write the subtask's rows (sorted by key group); ``None`` when it has none."""
        rng = compute_key_group_range_for_operator_index(
            self.max_parallelism, self.parallelism, subtask
        )
        metas = [s.header_meta() for s in self.states]
        header = SnapshotHeader(
            self.max_parallelism, rng, tuple(metas), SnapshotType.SAVEPOINT, "state-processor"
        )
        groups = _key_groups(batches)
        pending = next(groups, None)
        n_states = len(metas)

        def block_of(kg: int) -> bytes | memoryview | None:
            nonlocal pending
            if pending is None or pending[0] != kg:
                return None
            rows = pending[1]
            pending = next(groups, None)
            self._check_unique(kg, rows, metas[0])
            return arrow_block(n_states, lambda sid, _kg: _columns(rows, sid, metas[sid]), kg)

        if pending is not None and not rng.contains(pending[0]):
            raise ValueError(
                f"Operator {self.uid!r}: key group {pending[0]} reached subtask "
                f"{subtask}, which owns {rng}"
            )
        out = self.target.stream_factory().create_checkpoint_state_output_stream()
        handle = write_key_groups_snapshot(out, header, block_of)
        if pending is not None:
            raise ValueError(
                f"Operator {self.uid!r}: rows of key group {pending[0]} reached "
                f"subtask {subtask} out of order or outside {rng}"
            )
        if self.after_write is not None:
            self.after_write(subtask)
        return handle

    def _check_unique(self, kg: int, rows: pa.Table, meta: RegisteredStateMeta) -> None:
        keys = rows.column("key")
        if pc.count_distinct(keys).as_py() == len(keys):
            return
        counts = pc.value_counts(keys)
        dup = next(c["values"] for c in counts.to_pylist() if c["counts"] > 1)
        key = meta.decode_key(dup)
        raise ValueError(
            f"Operator {self.uid!r}: key {_describe(key)} appears in more than one "
            "row of the bootstrap DataFrame; give one row per key"
        )


def _columns(rows: pa.Table, state_id: int, meta: RegisteredStateMeta) -> Columns | None:
    """Canonical columns of one state in the rows of one key group (``None``: no entry)."""
    col = rows.column(f"s{state_id}").combine_chunks()
    keys = rows.column("key").combine_chunks()
    valid = col.is_valid()
    if meta.kind is StateKind.MAP:
        entries = col.filter(valid)
        flat = pc.list_flatten(entries)
        if len(flat) == 0:
            return None
        owners = keys.filter(valid).take(pc.list_parent_indices(entries))
        return owners, flat.field("k"), flat.field("v")
    values = col.filter(valid)
    if len(values) == 0:
        return None
    return keys.filter(valid), None, values


def _key_groups(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, pa.Table]]:
    """``(key group, its rows)`` of batches sorted by key group (a group may span batches)."""
    current = -1
    parts: list[pa.RecordBatch] = []
    for batch in batches:
        if batch.num_rows == 0:
            continue
        kgs = batch.column("kg").to_numpy()
        if np.any(np.diff(kgs) < 0):
            raise ValueError("Rows are not sorted by key group")
        starts = [0, *(np.flatnonzero(np.diff(kgs)) + 1).tolist()]
        ends = [*starts[1:], len(kgs)]
        for lo, hi in zip(starts, ends):
            kg = int(kgs[lo])
            if kg != current:
                if parts:
                    yield current, pa.Table.from_batches(parts)
                if kg < current:
                    raise ValueError("Rows are not sorted by key group")
                current, parts = kg, []
            parts.append(batch.slice(lo, hi - lo))
    if parts:
        yield current, pa.Table.from_batches(parts)
