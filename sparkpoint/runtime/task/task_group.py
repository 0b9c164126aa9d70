"""One task group of one stage for one run: its subtasks run one after the other, and
their rows are cut by the shuffle partition of the next exchange.

Both epoch modes run a group through here: a Spark task per group and epoch
(``spark/epoch.py``), or a long-running task that runs the groups the driver orders
(``spark/long_running_task.py``); only how rows arrive and leave differs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from sparkpoint.connectors.source import Source, SplitRange, TimestampedBatch
from sparkpoint.runtime.graph import Stage
from sparkpoint.runtime.protocol import EpochSpec

__all__ = ["route_rows", "run_group"]

Row = tuple[int, int, Any]
_READ_AHEAD_THREADS = 4


def _by_subtask(
    rows: Iterable[Row], offset: int, subtasks: tuple[int, ...]
) -> dict[int, list[Row]]:
    """A task group's input rows split by subtask (rows name their channel)."""
    per: dict[int, list[Row]] = {sub: [] for sub in subtasks}
    for row in rows:
        per[row[0] - offset].append(row)
    return per


def run_group(
    spec: EpochSpec,
    stage: Stage,
    group: tuple[int, ...],
    rows: Iterator[Row] | None,
    attempt: int,
    num_partitions: int,
) -> list[Row]:
    """Run the subtasks of ``group`` with their input ``rows`` (None for a source stage)
    and return every row they emit, reports included."""
    from sparkpoint.runtime.task.executor import current_executor
    from sparkpoint.runtime.task.gc_policy import collect_after_task
    from sparkpoint.runtime.task.local_dirs import job_dir
    from sparkpoint.runtime.task.restore_watchdog import restore_watchdog
    from sparkpoint.runtime.task.stage_task import StageTask
    from sparkpoint.state.pickling import set_allow_pickle

    job = spec.job
    set_allow_pickle(job.allow_pickle)
    if job.fs_options:
        from sparkpoint.fs.registry import configure, get_options

        if dict(get_options()) != dict(job.fs_options):
            configure(dict(job.fs_options))
    local = job_dir(job.application_id, job.local_state_dir, job.job_id)
    executor = current_executor()
    inputs: dict[int, Any]
    if rows is None:
        inputs = {sub: () for sub in group}
    elif len(group) == 1:
        inputs = {group[0]: rows}
    else:
        inputs = _by_subtask(rows, stage.channel_offset, group)
    out: list[Row] = []
    restoring = any(sub in subtasks for subtasks in spec.restore.values() for sub in group)
    with (
        collect_after_task(),
        restore_watchdog(job.restore_timeout_s if restoring else None),
        _read_ahead(spec, stage, group) as ahead,
    ):
        for sub in group:
            task = StageTask(
                spec, stage, sub, attempt, executor, local, num_partitions, ahead.get(sub)
            )
            out.extend(task.run(iter(inputs.pop(sub))))
    return out


@contextmanager
def _read_ahead(
    spec: EpochSpec, stage: Stage, group: tuple[int, ...]
) -> Iterator[dict[int, Future[list[TimestampedBatch]]]]:
    """For a source whose ranges may be read at once (``Source.concurrent_reads``), the
    ranges of the group's later subtasks read in threads while the first is processed (a
    range's read is mostly waiting on the source's round trips)."""
    node = stage.source
    if node is None or len(group) < 2 or not getattr(node.source, "concurrent_reads", False):
        yield {}
        return
    ranges = spec.source_ranges.get(stage.id, [])
    source = node.source
    later = [sub for sub in group[1:] if sub < len(ranges)]
    with ThreadPoolExecutor(
        max_workers=min(len(later), _READ_AHEAD_THREADS) or 1,
        thread_name_prefix="sparkpoint-read-ahead",
    ) as pool:
        yield {sub: pool.submit(_read_all, source, ranges[sub]) for sub in later}


def _read_all(source: Source, split_range: SplitRange) -> list[TimestampedBatch]:
    return list(source.read_batches(split_range))


def route_rows(spec: EpochSpec, stage: Stage, out: list[Row]) -> list[list[Row]] | None:
    """``out`` cut by shuffle partition of the stage's exchange (every partition gets a
    list, empty or not); None for a final stage, whose rows go to the driver."""
    routes = spec.job.routes.get(stage.id)
    if routes is None:
        return None
    table = spec.shuffle_partitions.get(stage.id)
    count = routes.channels if table is None else max(table) + 1
    by_partition: list[list[Row]] = [[] for _ in range(count)]
    for row in out:
        by_partition[row[0] if table is None else table[row[0]]].append(row)
    return by_partition
