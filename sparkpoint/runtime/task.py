"""One subtask of one stage for one epoch: the function Spark runs through ``mapInArrow``.

It builds the stage's operator tree, opens keyed state (checking the local marker, restoring
when asked, undoing a commit left by an earlier attempt of the same epoch), pushes the input
through, fires timers, commits state locally, snapshots it when a checkpoint is due, and
emits rows for the next stage and for the driver.
"""

from __future__ import annotations

import json
import os
import pickle
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from sparkpoint.clock import FixedClock
from sparkpoint.errors import StateLostError
from sparkpoint.runtime.context import MAX_WATERMARK, MIN_WATERMARK, OperatorEnv
from sparkpoint.runtime.graph import Node, Stage
from sparkpoint.runtime.operators import (
    FilterOperator,
    FlatMapOperator,
    KeyedProcessOperator,
    MapOperator,
    Operator,
    ProcessOperator,
    ReduceOperator,
    TimestampsOperator,
)
from sparkpoint.runtime.records import (
    KIND_ACK,
    KIND_COLLECT,
    KIND_COMMITTABLE,
    KIND_DATA,
    KIND_META,
    KIND_STATS,
    decode_data,
    encode_data,
    iter_rows,
    rows_to_arrow,
)
from sparkpoint.state.key_groups import assign_to_key_group, int64_key_groups

__all__ = ["CheckpointRequest", "EpochSpec", "StageTask", "run_stage_task"]

_GROUP_TARGET = 8192  # records per data row before it is flushed
_NO_TIMER = MAX_WATERMARK + 1  # index value: no timer registered


@dataclass(frozen=True)
class CheckpointRequest:
    """A checkpoint (or savepoint) the tasks of this epoch snapshot into."""

    checkpoint_id: int
    storage: Any  # CheckpointStorage (configuration, picklable)
    location_reference: Any  # CheckpointStorageLocationReference
    snapshot_type: str


@dataclass
class EpochSpec:
    """Everything the tasks of one epoch need; pickled into the Spark closure."""

    job_id: str
    job_name: str
    epoch: int
    incarnation: int
    end_of_input: bool
    batch_mode: bool
    watermarks: dict[str, int]
    generator_state: dict[str, int]
    state_backend: Any
    local_root: str
    source_ranges: dict[int, list[Any]]  # stage id -> one SplitRange per partition
    # Processing time of this epoch in every task (timers, TTL): the driver's clock, read
    # once when the epoch was planned, so all tasks and retries see the same time.
    processing_time_ms: int
    checkpoint: CheckpointRequest | None = None
    # operator id -> subtask -> keyed handles to restore from (first epoch of an incarnation)
    restore: dict[str, dict[int, list[Any]]] | None = None
    notify_complete: int | None = None
    job_parameters: dict[str, str] = field(default_factory=dict)
    final_stage_ids: frozenset[int] = frozenset()
    next_parallelism: dict[int, int] = field(default_factory=dict)
    next_router: dict[int, Any] = field(default_factory=dict)  # stage -> (key selector, P, maxP)
    fs_options: dict[str, str] = field(default_factory=dict)  # sparkpoint.fs.configure options
    # Failure-injection hook (tests): called with (operator id, subtask, epoch) after each
    # local commit, before the task reports success.
    after_local_commit: Any = None


def _global_watermark(marks: dict[str, int], end_of_input: bool) -> int:
    if end_of_input:
        return MAX_WATERMARK
    return min(marks.values()) if marks else MIN_WATERMARK


class _Router(Operator):
    """The exit of a stage: groups records by the next stage's subtask."""

    def __init__(self, spec: EpochSpec, stage: Stage, out: list[tuple[int, int, bytes]]) -> None:
        super().__init__("router", "router")
        self.out = out
        router = spec.next_router.get(stage.id)
        self.key_selector = router[0] if router else None
        self.parallelism = router[1] if router else 1
        self.max_parallelism = router[2] if router else 1
        self.groups: dict[int, tuple[list[Any], list[int | None] | None]] = {}
        self._cache: dict[Any, int] = {}

    def push(self, values: list[Any], timestamps: list[int | None] | None) -> None:
        if self.key_selector is None:
            self._add(self.env.subtask_index % max(self.parallelism, 1), values, timestamps)
            return
        subs = self._subtasks([self.key_selector.get_key(v) for v in values])
        if self.parallelism == 1:
            self._add(0, values, timestamps)
            return
        by_sub: dict[int, list[int]] = {}
        for i, sub in enumerate(subs):
            by_sub.setdefault(sub, []).append(i)
        for sub, idx in by_sub.items():
            vs = [values[i] for i in idx]
            ts = None if timestamps is None else [timestamps[i] for i in idx]
            self._add(sub, vs, ts)

    def _subtasks(self, keys: list[Any]) -> list[int]:
        """The target subtask of each key: vectorised for int keys, memoised otherwise."""
        maxp, p = self.max_parallelism, self.parallelism
        kgs = int64_key_groups(keys, maxp)
        if kgs is not None:
            return ((kgs.astype(np.int64) * p) // maxp).tolist()  # type: ignore[no-any-return]
        cache = self._cache
        out = []
        for k in keys:
            try:
                ck = (k.__class__, k)
                sub = cache.get(ck)
                if sub is None:
                    sub = cache[ck] = assign_to_key_group(k, maxp) * p // maxp
            except TypeError:  # unhashable key: no memo
                sub = assign_to_key_group(k, maxp) * p // maxp
            out.append(sub)
        return out

    def _add(self, sub: int, values: list[Any], timestamps: list[int | None] | None) -> None:
        group = self.groups.get(sub)
        if group is None:
            group = self.groups[sub] = ([], [] if timestamps is not None else None)
        gv, gt = group
        if gt is None and timestamps is not None:
            gt = [None] * len(gv)
            self.groups[sub] = (gv, gt)
        gv.extend(values)
        if gt is not None:
            gt.extend(timestamps if timestamps is not None else [None] * len(values))
        if len(gv) >= _GROUP_TARGET:
            self._flush(sub)

    def _flush(self, sub: int) -> None:
        gv, gt = self.groups.pop(sub)
        if gv:
            self.out.append((sub, KIND_DATA, encode_data(gv, gt)))

    def end_epoch(self) -> None:
        for sub in list(self.groups):
            self._flush(sub)


class _SinkOperator(Operator):
    """Feeds a sink writer; its committables go to the driver."""

    def __init__(self, node: Node, out: list[tuple[int, int, bytes]]) -> None:
        super().__init__(node.operator_id, node.name)
        self.sink = node.sink
        self.out = out
        self.writer: Any = None

    def open(self, env: OperatorEnv) -> None:
        self.env = env
        self.writer = self.sink.create_writer(
            env.job_id, env.epoch, env.subtask_index, env.parallelism, env.attempt_number
        )

    def push(self, values: list[Any], timestamps: list[int | None] | None) -> None:
        self.writer.write(values)

    def end_epoch(self) -> None:
        committables = self.writer.prepare_commit()
        if committables:
            kind = KIND_COMMITTABLE if self.sink.transactional else KIND_COLLECT
            payload = pickle.dumps((self.operator_id, self.env.subtask_index, committables))
            self.out.append((0, kind, payload))


def _build_operator(node: Node, spec: EpochSpec, out: list[tuple[int, int, bytes]]) -> Operator:
    k = node.kind
    oid, name = node.operator_id, node.name
    if k == "map":
        return MapOperator(oid, name, node.function)
    if k == "flat_map":
        return FlatMapOperator(oid, name, node.function)
    if k == "filter":
        return FilterOperator(oid, name, node.function)
    if k == "process":
        return ProcessOperator(oid, name, node.function)
    if k == "timestamps":
        return TimestampsOperator(oid, name, node.watermark_strategy)
    if k == "keyed_process":
        return KeyedProcessOperator(
            oid, name, node.function, node.inputs[0].key_selector, node.call
        )
    if k == "reduce":
        return ReduceOperator(
            oid, name, node.function, node.inputs[0].key_selector, spec.batch_mode
        )
    if k == "sink":
        return _SinkOperator(node, out)
    # source, union and key_by pass records through
    return Operator(oid, name)


class StageTask:
    """Runs one partition of one stage for one epoch."""

    def __init__(
        self, spec: EpochSpec, stage: Stage, partition: int, attempt: int, num_partitions: int = 0
    ) -> None:
        self.spec = spec
        # Source and union stages have no fixed parallelism: their subtasks this epoch.
        self.parallelism = stage.parallelism or max(1, num_partitions)
        self.stage = stage
        self.partition = partition
        self.attempt = attempt
        self.out: list[tuple[int, int, bytes]] = []
        self.backends: dict[str, Any] = {}
        # operator id -> [earliest event-time timer, earliest processing-time timer]; None
        # means unknown (scan the timers state once), _NO_TIMER means there is none.
        self.timer_index: dict[str, list[int | None]] = {}
        self.reported: dict[str, int] = {}
        self.reported_max: dict[str, int | None] = {}
        # Watermarks are reported per split in source stages, per subtask elsewhere; a split
        # read to its end reports the maximum watermark.
        self._watermark_scope = str(partition)
        self._split_done = False
        self.is_final = stage.id in spec.final_stage_ids
        self.next_p = spec.next_parallelism.get(stage.id, 1)
        self.clock = FixedClock(spec.processing_time_ms)

    # -- operator tree ---------------------------------------------------------------------
    def _build_tree(self) -> list[Operator]:
        stage = self.stage
        ops: dict[int, Operator] = {}
        for node in stage.members:
            if node.kind == "key_by":
                continue
            ops[node.id] = _build_operator(node, self.spec, self.out)
        roots = {r.id for r in stage.roots}
        for node in stage.members:
            if node.id not in ops or node.id in roots:
                continue
            for inp in node.inputs:
                src = inp.inputs[0] if inp.kind == "key_by" else inp
                if src.id in ops:
                    ops[src.id].children.append(ops[node.id])
        if stage.exit is not None:
            router = _Router(self.spec, stage, self.out)
            ops[stage.exit.id].children.append(router)
        return [ops[r.id] for r in stage.roots]

    # -- keyed state -----------------------------------------------------------------------
    def _open_backend(self, operator_id: str) -> Any:
        if operator_id in self.backends:
            return self.backends[operator_id]
        from sparkpoint.state.backend import KeyedStateBackendParameters
        from sparkpoint.state.key_groups import compute_key_group_range_for_operator_index

        spec, stage = self.spec, self.stage
        kg_range = compute_key_group_range_for_operator_index(
            stage.max_parallelism, stage.parallelism, self.partition
        )
        local_dir = os.path.join(spec.local_root, spec.job_id, operator_id, str(self.partition))
        params = KeyedStateBackendParameters(
            job_id=spec.job_id,
            operator_id=operator_id,
            subtask_index=self.partition,
            parallelism=stage.parallelism,
            max_parallelism=stage.max_parallelism,
            key_group_range=kg_range,
            local_dir=local_dir,
            clock=self.clock,
        )
        backend = spec.state_backend.create_keyed_state_backend(params)
        marker = {"job": spec.job_id, "incarnation": spec.incarnation}
        backend = self._check_local_state(backend, params, marker)
        if spec.notify_complete is not None:
            backend.notify_checkpoint_complete(spec.notify_complete)
        self.backends[operator_id] = backend
        return backend

    def _check_local_state(self, backend: Any, params: Any, marker: dict[str, Any]) -> Any:
        """Accept local state committed by the previous epoch of this incarnation (undoing a
        commit of this very epoch left by an earlier attempt); else restore or refuse."""
        spec = self.spec
        epoch = spec.epoch
        op_id = params.operator_id
        local = backend.local_epoch()
        extra = backend.local_extra()
        found = json.loads(extra) if extra else {}
        ok = False
        same = {k: found.get(k) for k in marker} == marker
        if same and local is not None:
            if local == epoch - 1:
                ok = True
            elif local == epoch:
                # An earlier attempt of this very epoch committed: undo it, then redo.
                ok = backend.revert_to(epoch - 1)
                found = json.loads(backend.local_extra() or b"{}")
        if ok:
            self.timer_index[op_id] = list(found.get("timers", [None, None]))
            return backend
        restore = spec.restore
        if restore is None:
            backend.close()
            raise StateLostError(
                f"Subtask {self.partition} of operator {op_id} found "
                f"{'no' if local is None else 'stale'} local state for epoch {epoch} "
                f"(local epoch {local}, marker {found}, expected {marker} at epoch {epoch - 1}) "
                f"in {params.local_dir}; the job restores from the latest checkpoint."
            )
        backend.dispose()
        backend = spec.state_backend.create_keyed_state_backend(params)
        handles = restore.get(op_id, {}).get(self.partition, [])
        backend.restore(handles)
        # Restored timers are unknown to the index: the first firing scans them.
        self.timer_index[op_id] = [None, None] if handles else [_NO_TIMER, _NO_TIMER]
        backend.commit_local(epoch - 1, self._marker_bytes(op_id))
        return backend

    def _marker_bytes(self, operator_id: str) -> bytes:
        """The local marker: job, incarnation and the operator's timer index."""
        spec = self.spec
        return json.dumps(
            {
                "job": spec.job_id,
                "incarnation": spec.incarnation,
                "timers": self.timer_index.get(operator_id, [None, None]),
            }
        ).encode()

    # -- running ---------------------------------------------------------------------------
    def _env(self) -> OperatorEnv:
        spec = self.spec
        return OperatorEnv(
            job_id=spec.job_id,
            task_name=spec.job_name,
            epoch=spec.epoch,
            subtask_index=self.partition,
            parallelism=self.parallelism,
            max_parallelism=self.stage.max_parallelism,
            attempt_number=self.attempt,
            end_of_input=spec.end_of_input,
            job_parameters=spec.job_parameters,
            watermark=_global_watermark(spec.watermarks, False),
            generator_state=spec.generator_state,
            keyed_backend=self._open_backend,
            timer_index=lambda op_id: self.timer_index.setdefault(op_id, [None, None]),
            report_watermark=self._report_watermark,
            clock=self.clock,
        )

    def _report_watermark(self, operator_id: str, watermark: int, max_ts: int | None) -> None:
        key = f"{operator_id}@{self._watermark_scope}"
        self.reported[key] = MAX_WATERMARK if self._split_done else watermark
        self.reported_max[key] = max_ts

    def run(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Process the partition; yields the output rows as Arrow batches."""
        t0 = time.perf_counter()
        spec = self.spec
        env = self._env()
        roots = self._build_tree()
        for root in roots:
            root.open(env)
        passthrough: list[tuple[int, int, bytes]] = []
        marks = dict(spec.watermarks)
        records = 0
        if self.stage.source is not None:
            for _ in batches:  # the split index row: drain it so Spark can reuse the worker
                pass
            ranges = spec.source_ranges.get(self.stage.id, [])
            if self.partition < len(ranges):
                split_range = ranges[self.partition]
                self._watermark_scope = split_range.split_id
                self._split_done = split_range.last
                for chunk in _chunks(self.stage.source.source.read(split_range)):
                    records += len(chunk)
                    for root in roots:
                        root.push(chunk, None)
        else:
            for sub, kind, payload in iter_rows(batches):
                if kind == KIND_DATA:
                    if self.stage.key_selector is not None and sub != self.partition:
                        raise RuntimeError(
                            f"Row for subtask {sub} arrived at partition {self.partition}: "
                            "Spark changed the partitioning (disable adaptive coalescing)."
                        )
                    values, timestamps = decode_data(payload)
                    records += len(values)
                    for root in roots:
                        root.push(values, timestamps)
                elif kind == KIND_META:
                    for key, wm in pickle.loads(payload)["watermarks"].items():
                        marks[key] = wm
                    if self.partition == 0:
                        passthrough.append((sub, kind, payload))
                else:
                    passthrough.append((sub, kind, payload))
        env.watermark = _global_watermark(marks, spec.end_of_input)
        for root in roots:
            root.end_epoch()
        for root in roots:
            root.close()
        acks = self._commit_and_snapshot()
        out = self.out
        if self.reported:
            meta = pickle.dumps({"watermarks": self.reported, "max_ts": self.reported_max})
            targets = [0] if self.is_final else range(self.next_p)
            out.extend((t, KIND_META, meta) for t in targets)
        if acks:
            out.append((0, KIND_ACK, pickle.dumps(acks)))
        stats = {
            "stage": self.stage.id,
            "subtask": self.partition,
            "attempt": self.attempt,
            "records_in": records,
            "seconds": time.perf_counter() - t0,
            "pid": os.getpid(),
            "state_bytes": sum(a[3] for a in acks),
        }
        out.append((0, KIND_STATS, pickle.dumps(stats)))
        for _sub, kind, payload in passthrough:
            if kind == KIND_META:
                targets = [0] if self.is_final else range(self.next_p)
                out.extend((t, kind, payload) for t in targets)
            else:
                out.append((self.partition % max(self.next_p, 1), kind, payload))
        if out:
            for i in range(0, len(out), 256):
                yield rows_to_arrow(out[i : i + 256])

    def _commit_and_snapshot(self) -> list[tuple[str, int, Any, int]]:
        spec = self.spec
        acks: list[tuple[str, int, Any, int]] = []
        factory = None
        try:
            for operator_id, backend in self.backends.items():
                backend.commit_local(spec.epoch, self._marker_bytes(operator_id))
                if spec.after_local_commit is not None:
                    spec.after_local_commit(operator_id, self.partition, spec.epoch)
                if spec.checkpoint is not None:
                    if factory is None:
                        cp = spec.checkpoint
                        access = cp.storage.create_checkpoint_storage(spec.job_id)
                        factory = access.resolve_checkpoint_storage_location(
                            cp.checkpoint_id, cp.location_reference
                        )
                    upload = backend.snapshot(
                        spec.checkpoint.checkpoint_id, factory, spec.checkpoint.snapshot_type
                    )
                    handle = upload()
                    size = handle.state_size if handle is not None else 0
                    acks.append((operator_id, self.partition, handle, size))
        finally:
            for backend in self.backends.values():
                backend.close()
        return acks


def _chunks(records: Iterator[Any]) -> Iterator[list[Any]]:
    """Batches of up to ``_GROUP_TARGET`` records."""
    buf: list[Any] = []
    for value in records:
        buf.append(value)
        if len(buf) >= _GROUP_TARGET:
            yield buf
            buf = []
    if buf:
        yield buf


def run_stage_task(
    spec: EpochSpec,
    stage: Stage,
    batches: Iterator[pa.RecordBatch],
    offset: int = 0,
    num_partitions: int = 0,
) -> Iterator[pa.RecordBatch]:
    """Entry point inside ``mapInArrow``: find our partition and attempt, then run."""
    from pyspark import TaskContext

    if spec.fs_options:
        from sparkpoint.fs.registry import configure, get_options

        if dict(get_options()) != spec.fs_options:
            configure(spec.fs_options)
    tc = TaskContext.get()
    partition = tc.partitionId() - offset if tc is not None else 0
    attempt = tc.attemptNumber() if tc is not None else 0
    yield from StageTask(spec, stage, partition, attempt, num_partitions).run(batches)
