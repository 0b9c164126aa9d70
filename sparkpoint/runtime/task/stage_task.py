"""One subtask of one stage for one run of an epoch: the function Spark runs.

It opens the subtask's keyed state (``keyed_state``) and operator state
(``carried_state``), builds the stage's operator tree (``stage_tree``), pushes the input
through, fires timers, commits keyed state locally, snapshots it when a checkpoint is due,
and emits rows for the next stage plus one ``TaskReport`` for the driver (which carries the
operator state to the next epoch).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from sparkpoint.clock import FixedClock
from sparkpoint.metrics.record_times import RecordTimesAccumulator, SourceRecordTimes
from sparkpoint.metrics.registry import TaskMetrics
from sparkpoint.metrics.sample import OperatorIO, TaskMetricsReport
from sparkpoint.runtime.graph import Stage
from sparkpoint.runtime.operators.context import MAX_WATERMARK, MIN_WATERMARK, OperatorEnv
from sparkpoint.runtime.protocol import (
    CarriedState,
    ChangelogAck,
    EpochSpec,
    ExecutorIdentity,
    SinkOutput,
    SnapshotAck,
    TaskReport,
)
from sparkpoint.runtime.task.carried_state import SubtaskOperatorState
from sparkpoint.runtime.task.keyed_state import SubtaskState
from sparkpoint.runtime.task.records import KIND_DATA, KIND_META, KIND_REPORT, decode_data
from sparkpoint.runtime.task.router import GROUP_TARGET
from sparkpoint.runtime.task.stage_tree import StageTree, build_tree
from sparkpoint.runtime.task.watermarks import combined_watermark

if TYPE_CHECKING:
    from concurrent.futures import Future

    from sparkpoint.connectors.source import SplitRange, TimestampedBatch

__all__ = ["StageTask"]


def _generator_state_for(state: Mapping[str, int], scope: str) -> dict[str, int]:
    """Each operator's max timestamp as seen in one watermark scope (a split, or a subtask
    after a shuffle): the scope's own entry; without one (a rescaled job, or a checkpoint
    that kept one entry per operator) the operator's smallest, which never makes a record
    wrongly late."""
    own: dict[str, int] = {}
    lowest: dict[str, int] = {}
    for key, ts in state.items():
        op, _, key_scope = key.partition("@")
        if key_scope == scope:
            own[op] = ts
        lowest[op] = min(ts, lowest.get(op, ts))
    return {**lowest, **own}


def _global_watermark(marks: dict[str, int], end_of_input: bool, spec: EpochSpec) -> int:
    if end_of_input:
        return MAX_WATERMARK
    return combined_watermark(marks, spec.idle_watermarks, spec.watermark_floor)


class StageTask:
    """Runs one partition of one stage for one epoch; keyed state lives under ``job_dir``,
    this executor's local directory of the job (``local_dirs.job_dir``)."""

    def __init__(
        self,
        spec: EpochSpec,
        stage: Stage,
        partition: int,
        attempt: int,
        executor: ExecutorIdentity,
        job_dir: str,
        num_partitions: int = 0,
        prefetched: Future[list[TimestampedBatch]] | None = None,
    ) -> None:
        self.spec = spec
        # The source range's batches, read ahead in another thread (``task_group``).
        self.prefetched = prefetched
        self.stage = stage
        self.partition = partition
        self.attempt = attempt
        self.executor = executor
        # Source stages have no fixed parallelism: their subtasks this epoch.
        self.parallelism = stage.parallelism or max(1, num_partitions)
        self.out: list[tuple[int, int, Any]] = []
        self.sink_outputs: list[SinkOutput] = []
        self.reported: dict[str, int] = {}
        self.reported_max: dict[str, int | None] = {}
        self.record_times: SourceRecordTimes | None = None
        # Watermarks are reported per split in source stages, per subtask elsewhere; a split
        # read to its end reports the maximum watermark.
        self._watermark_scope = str(partition)
        self._split_done = False
        self._no_split = False  # a source subtask with no split to read in this epoch
        job = spec.job
        self.routes = job.routes.get(stage.id)
        self.clock = FixedClock(spec.processing_time_ms)
        self.metrics = TaskMetrics(
            {op: bases[partition] for op, bases in spec.metric_bases.items() if partition in bases}
        )
        self.tree: StageTree | None = None
        self.state = SubtaskState(
            spec,
            stage,
            partition,
            lambda op_id: os.path.join(job_dir, op_id, str(partition)),
            self.clock,
        )

    def _env(self) -> OperatorEnv:
        spec = self.spec
        return OperatorEnv(
            job_id=spec.job.job_id,
            task_name=spec.job.job_name,
            epoch=spec.epoch,
            subtask_index=self.partition,
            parallelism=self.parallelism,
            max_parallelism=self.stage.max_parallelism,
            attempt_number=self.attempt,
            end_of_input=spec.end_of_input,
            job_parameters=dict(spec.job.job_parameters),
            watermark=_global_watermark(dict(spec.watermarks), False, spec),
            generator_state=_generator_state_for(spec.generator_state, self._watermark_scope),
            keyed_backend=self.state.backend,
            operator_state_backend=self.operator_state.backend,
            timer_index=lambda op_id: self.state.timer_index.setdefault(op_id, [None, None]),
            report_watermark=self._report_watermark,
            clock=self.clock,
            metric_group=self.metrics.group,
        )

    def _report_watermark(self, operator_id: str, watermark: int, max_ts: int | None) -> None:
        if self._no_split:
            # No split, so no watermark of its own: an entry under the subtask's scope would
            # stay in the job's watermarks, never idle, and hold them back (Flink's reader
            # without splits emits none either).
            return
        key = f"{operator_id}@{self._watermark_scope}"
        if self._split_done:
            watermark = MAX_WATERMARK
        elif not self.spec.job.periodic_watermarks:
            watermark = MIN_WATERMARK
        self.reported[key] = watermark
        self.reported_max[key] = max_ts

    def _targets(self) -> Iterable[int]:
        """Channels that get watermarks: every subtask of every consumer."""
        return [0] if self.routes is None else self.routes.meta_channels

    def _report_channel(self) -> int:
        r = self.routes
        return 0 if r is None else r.report_offset + self.partition % r.report_parallelism

    def run(self, rows: Iterator[tuple[int, int, Any]]) -> list[tuple[int, int, Any]]:
        """Process the partition's input rows; returns the output rows (the task's report
        included, as a ``KIND_REPORT`` row)."""
        t0 = time.perf_counter()
        spec = self.spec
        passthrough: list[tuple[int, int, Any]] = []
        self.state.settle_uploads()
        if not self.state.open_all():
            for _ in rows:  # drain the input so Spark can reuse the worker
                pass
            return self._finish(t0, 0, ([], []), [], passthrough)
        self.operator_state = SubtaskOperatorState(spec, self.stage, self.partition)
        split_range = self._split_range()
        env = self._env()
        tree = build_tree(self.stage, spec.job.batch_mode, self.routes, self.out, self.sink_outputs)
        self.tree = tree
        tree.after_batch = self.metrics.fold  # distributions hold one batch's values at most
        for root in tree.roots:
            root.open(env)
        marks = dict(spec.watermarks)
        if self.stage.source is not None:
            records = self._read_split(tree, split_range)
        else:
            records = self._read_inputs(tree, rows, marks, passthrough)
        env.watermark = self.watermark = _global_watermark(marks, spec.end_of_input, spec)
        for root in tree.roots:
            root.end_epoch()
        for root in tree.roots:
            root.close()
        try:
            keyed_acks, changes = self.state.commit_and_snapshot()
            carried, operator_acks = self.operator_state.snapshot()
        except BaseException:
            with contextlib.suppress(Exception):  # the snapshot's error is the task's
                tree.finish_sinks()
            raise
        tree.finish_sinks()  # the sinks' flushes ran while the state was snapshot
        return self._finish(
            t0, records, (keyed_acks + operator_acks, changes), carried, passthrough
        )

    def _split_range(self) -> SplitRange | None:
        """The ``SplitRange`` a source stage's subtask reads this epoch (None: none, or not
        a source stage); its watermarks are then reported for the split."""
        if self.stage.source is None:
            return None
        ranges = self.spec.source_ranges.get(self.stage.id, [])
        if self.partition >= len(ranges):
            self._no_split = True
            return None
        split_range = ranges[self.partition]
        self._watermark_scope = split_range.split_id
        self._split_done = split_range.last
        return split_range

    def _read_split(self, tree: StageTree, split_range: SplitRange | None) -> int:
        """Push the records of the source split's range through, with the timestamps the
        source gives them, in batches of at most ``GROUP_TARGET``; returns their count."""
        source = self.stage.source
        if split_range is None or source is None:
            return 0
        records = 0
        times = RecordTimesAccumulator()
        batches: Iterable[TimestampedBatch] = (
            source.source.read_batches(split_range)
            if self.prefetched is None
            else self.prefetched.result()
        )
        for values, timestamps in batches:
            records += len(values)
            times.add(timestamps, len(values))
            if len(values) <= GROUP_TARGET:
                tree.push_input(-1, values, timestamps)
                continue
            for start in range(0, len(values), GROUP_TARGET):
                stop = start + GROUP_TARGET
                ts = None if timestamps is None else timestamps[start:stop]
                tree.push_input(-1, values[start:stop], ts)
        self.record_times = times.result(source.operator_id)
        return records

    def _read_inputs(
        self,
        tree: StageTree,
        rows: Iterator[tuple[int, int, Any]],
        marks: dict[str, int],
        passthrough: list[tuple[int, int, Any]],
    ) -> int:
        """Push the data rows of the input edges through (deferred edges last), merge the
        watermark rows into ``marks`` and keep the rows to pass on; returns the record
        count."""
        pending = _Coalesced(tree)
        deferred: list[tuple[int, Any]] = []
        records = 0
        for sub, kind, payload in rows:
            if kind == KIND_DATA:
                if payload[0] in tree.deferred:
                    deferred.append(payload)
                    continue
                records += pending.add_encoded(payload)
            elif kind == KIND_META:
                marks.update(payload)
                if self.partition == 0:
                    passthrough.append((sub, kind, payload))
            else:
                passthrough.append((sub, kind, payload))
        pending.flush()
        for payload in deferred:
            records += pending.add_encoded(payload)
        pending.flush()
        return records

    def _finish(
        self,
        t0: float,
        records: int,
        acks: tuple[list[SnapshotAck], list[ChangelogAck]],
        carried: list[CarriedState],
        passthrough: list[tuple[int, int, Any]],
    ) -> list[tuple[int, int, Any]]:
        out = self.out
        if self.reported:
            meta = dict(self.reported)
            out.extend((t, KIND_META, meta) for t in self._targets())
        report = TaskReport(
            stage=self.stage.id,
            subtask=self.partition,
            attempt=self.attempt,
            executor=self.executor,
            records_in=records,
            seconds=time.perf_counter() - t0,
            snapshots=tuple(acks[0]),
            changelogs=tuple(acks[1]),
            sink_outputs=tuple(self.sink_outputs),
            watermarks=dict(self.reported),
            max_timestamps=dict(self.reported_max),
            restored=tuple(self.state.restored),
            lost=tuple(self.state.lost),
            uploads=tuple(self.state.upload_statuses()),
            materializations=tuple(self.state.materialization_statuses()),
            operator_states=tuple(carried),
            metrics=self._metrics_report(),
            record_times=self.record_times,
        )
        report_channel = self._report_channel()
        out.append((report_channel, KIND_REPORT, report))
        for _sub, kind, payload in passthrough:
            if kind == KIND_META:
                out.extend((t, kind, payload) for t in self._targets())
            else:
                out.append((report_channel, kind, payload))
        return out

    def _metrics_report(self) -> TaskMetricsReport | None:
        """Records in/out, late drops and watermarks per operator, and the user metrics."""
        if self.tree is None:
            return None
        wm = self.watermark
        operators = tuple(
            OperatorIO(
                op.operator_id,
                op.name,
                op.records_in,
                op.records_out,
                op.late_records_dropped(),
                wm,
                op.output_watermark(wm),
            )
            for op in self.tree.operators()
        )
        return TaskMetricsReport(self.partition, operators, self.metrics.samples())


class _Coalesced:
    """Consecutive input groups of one input edge pushed as one batch (up to
    ``GROUP_TARGET`` records): at high parallelism every upstream subtask sends each
    subtask a small group, and every push has a fixed cost (key groups of the batch,
    operator calls). Records keep their order; watermarks apply at the epoch's end."""

    def __init__(self, tree: StageTree) -> None:
        self.tree = tree
        self.input_index = 0
        self.values: list[Any] = []
        self.timestamps: list[int | None] | None = None

    def add(self, input_index: int, values: list[Any], timestamps: list[int | None] | None) -> None:
        if self.values and (
            input_index != self.input_index or len(self.values) + len(values) > GROUP_TARGET
        ):
            self.flush()
        if not self.values:
            self.input_index, self.values, self.timestamps = input_index, values, timestamps
            return
        # The lists are the decoded groups' own (nothing else holds them): extend in place.
        if timestamps is not None or self.timestamps is not None:
            if self.timestamps is None:
                self.timestamps = [None] * len(self.values)
            self.timestamps.extend(timestamps if timestamps is not None else [None] * len(values))
        self.values.extend(values)

    def add_encoded(self, payload: tuple[int, Any]) -> int:
        """Add a data row's ``(input_index, encoded group)``; returns its record count."""
        input_index, data = payload
        values, timestamps = decode_data(data)
        self.add(input_index, values, timestamps)
        return len(values)

    def flush(self) -> None:
        if self.values:
            self.tree.push_input(self.input_index, self.values, self.timestamps)
        self.values, self.timestamps = [], None
