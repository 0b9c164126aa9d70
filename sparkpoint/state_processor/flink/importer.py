"""Writing a sparkpoint savepoint from a Flink savepoint of a PyFlink job.

The keyed state of each operator named (by uid, with the program's state descriptors) is
decoded (``pyflink_state``) and written as sparkpoint writes a bootstrapped savepoint: the
keys re-placed in key groups by sparkpoint's rule (Flink hashes the pickled key bytes,
sparkpoint the key's value), one savepoint stream per subtask, at Flink's parallelism and
max parallelism. No Spark: it runs in the calling process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkpoint.checkpoint.metadata import CheckpointMetadata, OperatorState, OperatorSubtaskState
from sparkpoint.checkpoint.metadata.file_format import write_metadata
from sparkpoint.checkpoint.properties import CheckpointProperties
from sparkpoint.checkpoint.trust import default_trust
from sparkpoint.config import CheckpointingOptions
from sparkpoint.errors import StorageError
from sparkpoint.fs import get_filesystem
from sparkpoint.state import typeinfo as ti
from sparkpoint.state.column_codecs import encode_column
from sparkpoint.state.descriptors import StateDescriptor, StateKind
from sparkpoint.state.key_groups import (
    KeyGroupAssigner,
    compute_key_group_range_for_operator_index,
    str_key_groups,
)
from sparkpoint.state.key_hash_rules import key_hash_master_state, rule_of
from sparkpoint.state.serializers import PickleSerializer
from sparkpoint.state.table import RegisteredStateMeta
from sparkpoint.state_processor.flink.metadata import read_metadata_file
from sparkpoint.state_processor.flink.pyflink_bulk import paused_gc
from sparkpoint.state_processor.flink.pyflink_state import (
    PyFlinkKeyedState,
    read_pyflink_keyed_state,
)
from sparkpoint.state_processor.flink.source_state import kafka_source_state
from sparkpoint.state_processor.flink.timers import carry_timers
from sparkpoint.state_processor.flink.windows import carry_windows
from sparkpoint.state_processor.state_writing import (
    ENTRY_TYPE,
    SavepointTarget,
    StateInput,
    SubtaskWriter,
)

__all__ = ["import_flink_savepoint"]


def import_flink_savepoint(
    flink_savepoint: str,
    target: str,
    states: Mapping[str, Sequence[StateDescriptor]],
    *,
    key_types: Mapping[str, ti.TypeInformation] | None = None,
    allow_pickle: bool = False,
    kafka_sources: Sequence[str] = (),
    job_name: str | None = None,
) -> str:
    """Write the sparkpoint savepoint ``target`` (a new directory) from the Flink savepoint
    ``flink_savepoint`` and return its path.

    ``states`` maps each operator uid to import to the state descriptors its function
    registers (the program's own ``ValueStateDescriptor(...)`` etc.): Flink's files keep
    PyFlink state as bytes, and the descriptors say what they are. ``key_types`` gives an
    operator's ``key_by(..., key_type=...)`` where the program declares one (it decides
    the key groups). ``allow_pickle`` lets pickled keys and values that name classes or
    functions load (they run code); plain data loads either way. ``kafka_sources`` names
    the uids of Kafka sources whose split offsets to carry (``kafka_source_state``);
    ``job_name`` is the sparkpoint job's name they are recorded for.
    """
    if not states and not kafka_sources:
        raise ValueError("Name at least one operator uid to import, with its state descriptors")
    metadata = read_metadata_file(flink_savepoint)
    what = f"Flink savepoint {flink_savepoint}"
    masters = kafka_source_state(metadata, kafka_sources, job_name, what)
    imported = [
        read_pyflink_keyed_state(metadata, uid, descs, what, allow_pickle)
        for uid, descs in states.items()
    ]
    key_types = dict(key_types or {})
    fs = get_filesystem(target)
    path = target.rstrip("/") or target
    if fs.exists(path) and (not fs.is_dir(path) or fs.list(path)):
        raise StorageError(
            f"The savepoint target {path} exists and is not an empty directory; choose a new path"
        )
    fs.mkdirs(path)
    out = SavepointTarget(
        path,
        CheckpointingOptions.FS_SMALL_FILE_THRESHOLD.default,
        CheckpointingOptions.FS_WRITE_BUFFER_SIZE.default,
    )
    try:
        operators = tuple(
            _write_operator(op, _descriptors(op, states[op.uid], what), key_types.get(op.uid), out)
            for op in imported
        )
        rules = {op.uid: rule_of(KeyGroupAssigner(key_types.get(op.uid))) for op in imported}
        meta = CheckpointMetadata(
            metadata.checkpoint_id,
            operators,
            (key_hash_master_state(rules), *masters),
            CheckpointProperties.for_savepoint(),
        )
        write_metadata(out.stream_factory(), meta, signing_key=default_trust().signing_key)
    except BaseException:
        fs.delete(path, recursive=True)
        raise
    return path


def _descriptors(
    op: PyFlinkKeyedState, descriptors: Sequence[StateDescriptor], what: str
) -> list[StateDescriptor]:
    """The states to write for ``op``: its own, its windows' and its timers' as sparkpoint
    keeps them (``op.values`` turned into those in place)."""
    return carry_timers(op.values, op.timers, carry_windows(op, descriptors, what))


def _write_operator(
    op: PyFlinkKeyedState,
    descriptors: Sequence[StateDescriptor],
    key_type: ti.TypeInformation | None,
    target: SavepointTarget,
) -> OperatorState:
    with paused_gc():
        return _write_keyed(op, descriptors, key_type, target)


def _write_keyed(
    op: PyFlinkKeyedState,
    descriptors: Sequence[StateDescriptor],
    key_type: ti.TypeInformation | None,
    target: SavepointTarget,
) -> OperatorState:
    """One operator's keyed state: per subtask a savepoint stream of its key groups."""
    key_ser = PickleSerializer()  # sparkpoint jobs keep every key pickled
    metas = [RegisteredStateMeta.from_descriptor(d, key_ser) for d in descriptors]
    inputs = [StateInput(m.to_json(), False, None) for m in metas]
    assigner = KeyGroupAssigner(key_type)
    max_p, parallelism = op.max_parallelism, op.parallelism
    keys = list(op.values)
    kgs = _key_groups(assigner, keys, max_p)
    # Columns in the order read (where the objects lie together), then put in key group
    # order (stable: as read within one key group).
    order = np.argsort(kgs, kind="stable")
    placed = pa.array(order)
    rows = list(op.values.values())
    names = ["key"] + [f"s{i}" for i in range(len(metas))]
    columns = [encode_column(key_ser, keys).take(placed)]
    columns += [_column(rows, meta).take(placed) for meta in metas]
    del keys, rows
    kgs = kgs[order]
    subs = kgs.astype(np.int64) * parallelism // max_p
    writer = SubtaskWriter(op.uid, inputs, max_p, parallelism, target)
    subtasks = {}
    bounds = np.flatnonzero(np.diff(subs)) + 1
    for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(kgs)]):
        if lo == hi:
            continue
        sub = int(subs[lo])
        rng = compute_key_group_range_for_operator_index(max_p, parallelism, sub)
        assert rng.contains(int(kgs[lo])) and rng.contains(int(kgs[hi - 1]))
        # the rows as SubtaskWriter takes them: sub, kg, key, per state its encoded bytes
        batch = pa.record_batch(
            [pa.array(np.zeros(hi - lo, np.int32)), pa.array(kgs[lo:hi].astype(np.int32))]
            + [c.slice(lo, hi - lo) for c in columns],
            names=["sub", "kg", *names],
        )
        handle = writer.write(sub, iter([batch]))
        if handle is not None:
            subtasks[sub] = OperatorSubtaskState(managed_keyed_state=(handle,))
    return OperatorState(op.uid, parallelism, max_p, subtasks)


def _key_groups(assigner: KeyGroupAssigner, keys: list[Any], max_p: int) -> np.ndarray:
    """The key group of every key: in one vectorised pass for int and ASCII str keys."""
    kgs = assigner.int64_key_groups(keys, max_p)
    if kgs is None and assigner.type_name is None:
        kgs = str_key_groups(keys, max_p)
    if kgs is None:
        kgs = np.fromiter((assigner.key_group(k, max_p) for k in keys), np.int32, len(keys))
    return kgs


def _column(rows: list[dict[str, Any]], meta: RegisteredStateMeta) -> pa.Array:
    """One state's column: per row its encoded bytes (entries for MAP state), null where
    the row has none."""
    if meta.kind is StateKind.MAP:
        return _map_column(rows, meta)
    present = [j for j, values in enumerate(rows) if meta.name in values]
    stored = [rows[j][meta.name] for j in present]
    if meta.kind is StateKind.LIST or meta.ttl:
        encoded = pa.array([meta.encode_value(v) for v in stored], pa.binary())
    else:  # the canonical bytes are the serializer's: a column at a time
        encoded = encode_column(meta.value_serializer, stored)
    return _spread(len(rows), present, encoded)


def _map_column(rows: list[dict[str, Any]], meta: RegisteredStateMeta) -> pa.Array:
    """A MAP state's column: per row its entries (encoded user key, encoded value), null
    for a row without entries."""
    maps = [values.get(meta.name) for values in rows]
    counts = np.fromiter((len(m) if m else 0 for m in maps), np.int32, len(maps))
    offsets = np.zeros(len(maps) + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    user_keys = [uk for m in maps if m for uk in m]
    values = [v for m in maps if m for v in m.values()]
    assert meta.user_key_serializer is not None
    if meta.ttl or any(v is None for v in values):
        encoded = pa.array([meta.encode_value(v) for v in values], pa.binary())
    else:  # a present value: flag 1 and the serializer's bytes
        encoded = pc.binary_join_element_wise(
            pa.repeat(pa.scalar(b"\x01", pa.binary()), len(values)),
            encode_column(meta.value_serializer, values),
            b"",
        )
    entries = pa.StructArray.from_arrays(
        [encode_column(meta.user_key_serializer, user_keys), encoded], ["k", "v"]
    )
    return pa.ListArray.from_arrays(
        pa.array(offsets), entries, ENTRY_TYPE, mask=pa.array(counts == 0)
    )


def _spread(n: int, present: list[int], encoded: pa.Array) -> pa.Array:
    """``encoded`` at the rows ``present`` of ``n``, null elsewhere."""
    if len(present) == n:
        return encoded
    at = np.full(n, -1, np.int64)
    at[present] = np.arange(len(present))
    return encoded.take(pa.array(at, mask=at < 0))
