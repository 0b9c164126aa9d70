"""numbers → map in slot sharing group ``heavy`` (2 CPU cores, 100 MB task heap) → key_by
→ map (no group), collected: each record with the task CPUs Spark gave each stage's task."""

from __future__ import annotations

from typing import Any


def _grouped(x: int) -> tuple[int, int]:
    from pyspark import TaskContext

    return x, TaskContext.get().cpus()


def _ungrouped(t: tuple[int, int]) -> tuple[int, int, int]:
    from pyspark import TaskContext

    return t[0], t[1], TaskContext.get().cpus()


def cpus_job(spark: Any, n: int) -> list[list[int]]:
    """Run the job on ``spark``; ``[x, cpus of the grouped stage, cpus of the next]`` per
    record ``x`` in ``0..n-1``, sorted."""
    from sparkpoint.common import Configuration, Types, WatermarkStrategy
    from sparkpoint.connectors.number_seq import NumberSequenceSource
    from sparkpoint.datastream import SlotSharingGroup, StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment(Configuration(), spark=spark)
    env.set_parallelism(2)
    heavy = SlotSharingGroup.builder("heavy").set_cpu_cores(2.0).set_task_heap_memory_mb(100)
    rows = (
        env.from_source(NumberSequenceSource(0, n - 1), WatermarkStrategy.no_watermarks(), "n")
        .map(_grouped, output_type=Types.TUPLE([Types.LONG(), Types.INT()]))
        .slot_sharing_group(heavy.build())
        .key_by(lambda t: t[0] % 4)
        .map(_ungrouped)
        .execute_and_collect("cpus", limit=n + 1)
    )
    return sorted([list(r) for r in rows])
