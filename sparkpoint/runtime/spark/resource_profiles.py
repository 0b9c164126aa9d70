"""A stage's slot sharing group resources as Spark's stage-level scheduling.

Flink gives every slot of a group the group's resources; a sparkpoint stage's subtask runs
in one Spark task, so a stage whose operators carry a group's CPU cores asks Spark for that
many CPUs per task (a ``TaskResourceProfile``). Spark accepts task-only profiles on
standalone (``spark://``, ``local-cluster``), YARN and Kubernetes masters, and profiles with
executor cores and memory only with dynamic allocation there; ``local[...]`` has none (Spark
raises). Where a stage's resources cannot apply, they are accepted without effect, with
one warning per job naming why.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sparkpoint.runtime.graph import Stage

__all__ = ["StageResources", "stage_profiles", "stage_resources", "unsupported_reason"]

_LOG = logging.getLogger(__name__)
_MIB = 1 << 20


@dataclass(frozen=True)
class StageResources:
    """What a stage's tasks ask Spark for: CPUs per task, and (dynamic allocation only)
    executor cores and memory (MiB; 0 for none)."""

    task_cpus: int
    executor_memory_mib: int = 0
    executor_offheap_mib: int = 0

    def profile(self, dynamic_allocation: bool) -> Any:
        """The pyspark ``ResourceProfile`` (executor requests only with dynamic allocation:
        without it Spark accepts task requests alone)."""
        from pyspark.resource import (
            ExecutorResourceRequests,
            ResourceProfileBuilder,
            TaskResourceRequests,
        )

        builder = ResourceProfileBuilder()
        builder.require(TaskResourceRequests().cpus(self.task_cpus))
        if dynamic_allocation:
            executor = ExecutorResourceRequests().cores(self.task_cpus)
            if self.executor_memory_mib:
                executor.memory(f"{self.executor_memory_mib}m")
            if self.executor_offheap_mib:
                executor.offheapMemory(f"{self.executor_offheap_mib}m")
            builder.require(executor)
        return builder.build


def stage_resources(stage: Stage) -> StageResources | None:
    """The resources of ``stage``'s slot sharing groups, summed over its distinct groups
    (each group's slot runs in the stage's one task); None when none has a spec."""
    groups: dict[str, Mapping[str, Any]] = {}
    for node in stage.members:
        if node.slot_resources:
            groups[node.slot_sharing_group or ""] = node.slot_resources
    if not groups:
        return None
    cpus = sum(float(r.get("cpu_cores") or 0.0) for r in groups.values())
    heap = sum(
        int(r.get("task_heap_memory_bytes") or 0) + int(r.get("managed_memory_bytes") or 0)
        for r in groups.values()
    )
    offheap = sum(int(r.get("task_off_heap_memory_bytes") or 0) for r in groups.values())
    return StageResources(
        task_cpus=max(1, math.ceil(cpus)),
        executor_memory_mib=-(-heap // _MIB),
        executor_offheap_mib=-(-offheap // _MIB),
    )


def unsupported_reason(master: str, conf: Mapping[str, str]) -> str | None:
    """Why stage-level scheduling does not apply on ``master`` (None: it does)."""
    if master == "local" or master.startswith("local["):
        return f"Spark's {master} master has no stage-level scheduling"
    if not master.startswith(("spark://", "local-cluster", "yarn", "k8s://")):
        return f"Spark supports stage-level scheduling on no {master} master"
    return None


def stage_profiles(
    stages: list[Stage], finals: frozenset[int], sc: Any, executor_cores: int | None
) -> dict[int, Any]:
    """The ``ResourceProfile`` of each stage of ``stages`` whose groups have resources, where
    ``sc``'s master applies them; a warning names the stages whose resources have no
    effect, and why. ``executor_cores``: the most cores of a live executor (None: none
    known yet); a stage asking more CPUs per task could never be scheduled without dynamic
    allocation."""
    wanted = {st.id: r for st in stages if (r := stage_resources(st)) is not None}
    if not wanted:
        return {}
    conf = dict(sc.getConf().getAll())
    reason = unsupported_reason(str(sc.master), conf)
    if reason is not None:
        _warn(wanted, reason)
        return {}
    # The final stages' rows are collected by one Spark stage: one profile for it at most.
    final = {wanted[i] for i in finals if i in wanted}
    if len(final) > 1:
        _warn({i: wanted.pop(i) for i in sorted(finals) if i in wanted}, "final stages differ")
    dynamic = conf.get("spark.dynamicAllocation.enabled", "false").lower() == "true"
    if not dynamic and executor_cores is not None:
        big = {i: r for i, r in wanted.items() if r.task_cpus > executor_cores}
        if big:
            _warn(big, f"more CPUs per task than an executor has ({executor_cores})")
            for i in big:
                del wanted[i]
    if not dynamic:
        memory = {
            i: r for i, r in wanted.items() if r.executor_memory_mib or r.executor_offheap_mib
        }
        if memory:
            _warn(memory, "memory needs spark.dynamicAllocation.enabled; CPUs per task apply")
    return {i: r.profile(dynamic) for i, r in wanted.items()}


def _warn(stages: Mapping[int, StageResources], reason: str) -> None:
    _LOG.warning(
        "Slot sharing group resources of stages %s are accepted without effect: %s",
        sorted(stages),
        reason,
    )
