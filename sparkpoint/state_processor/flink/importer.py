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

import pyarrow as pa

from sparkpoint.checkpoint.metadata import CheckpointMetadata, OperatorState, OperatorSubtaskState
from sparkpoint.checkpoint.metadata.file_format import write_metadata
from sparkpoint.checkpoint.properties import CheckpointProperties
from sparkpoint.checkpoint.trust import default_trust
from sparkpoint.config import CheckpointingOptions
from sparkpoint.errors import StorageError
from sparkpoint.fs import get_filesystem
from sparkpoint.state import typeinfo as ti
from sparkpoint.state.descriptors import StateDescriptor, StateKind
from sparkpoint.state.key_groups import (
    KeyGroupAssigner,
    compute_key_group_range_for_operator_index,
)
from sparkpoint.state.key_hash_rules import key_hash_master_state, rule_of
from sparkpoint.state.serializers import PickleSerializer
from sparkpoint.state.table import RegisteredStateMeta
from sparkpoint.state_processor.flink.metadata import read_metadata_file
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
    key_ser = PickleSerializer()  # sparkpoint jobs keep every key pickled
    metas = [RegisteredStateMeta.from_descriptor(d, key_ser) for d in descriptors]
    inputs = [StateInput(m.to_json(), False, None) for m in metas]
    assigner = KeyGroupAssigner(key_type)
    max_p, parallelism = op.max_parallelism, op.parallelism
    by_sub: dict[int, list[tuple[int, bytes, dict[str, Any]]]] = {}
    for key, values in op.values.items():
        kg = assigner.key_group(key, max_p)
        sub = kg * parallelism // max_p
        by_sub.setdefault(sub, []).append((kg, key_ser.serialize(key), values))
    writer = SubtaskWriter(op.uid, inputs, max_p, parallelism, target)
    subtasks = {}
    for sub, rows in sorted(by_sub.items()):
        rng = compute_key_group_range_for_operator_index(max_p, parallelism, sub)
        rows.sort(key=lambda r: r[0])
        assert rng.contains(rows[0][0]) and rng.contains(rows[-1][0])
        batch = _batch(rows, metas)
        handle = writer.write(sub, iter([batch]))
        if handle is not None:
            subtasks[sub] = OperatorSubtaskState(managed_keyed_state=(handle,))
    return OperatorState(op.uid, parallelism, max_p, subtasks)


def _batch(
    rows: list[tuple[int, bytes, dict[str, Any]]], metas: list[RegisteredStateMeta]
) -> pa.RecordBatch:
    """The rows of one subtask as ``SubtaskWriter`` takes them: ``sub``, ``kg``, ``key``
    and per state its encoded bytes (entries for MAP state), null where absent."""
    cols: list[pa.Array] = [
        pa.array([0] * len(rows), pa.int32()),
        pa.array([r[0] for r in rows], pa.int32()),
        pa.array([r[1] for r in rows], pa.binary()),
    ]
    names = ["sub", "kg", "key"]
    for i, meta in enumerate(metas):
        names.append(f"s{i}")
        if meta.kind is StateKind.MAP:
            entries = []
            for _, _, values in rows:
                m = values.get(meta.name)
                entries.append(
                    [
                        {
                            "k": meta.encode_user_key(uk),
                            "v": meta.encode_value(v),
                        }
                        for uk, v in m.items()
                    ]
                    if m
                    else None
                )
            cols.append(pa.array(entries, ENTRY_TYPE))
            continue
        encoded: list[bytes | None] = []
        for _, _, values in rows:
            if meta.name not in values:
                encoded.append(None)
                continue
            # TTL'd state holds TtlValues with Flink's timestamps (pyflink_state refuses a
            # TTL on one side only), so expiry goes on from Flink's last access
            encoded.append(meta.encode_value(values[meta.name]))
        cols.append(pa.array(encoded, pa.binary()))
    return pa.record_batch(cols, names=names)
