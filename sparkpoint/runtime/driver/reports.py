"""What a job reports per epoch: where keyed tasks ran, which subtasks restored, which
whole-job failovers happened (the job client, the logs, the demo and the CLI show these)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.checkpoint.stats import format_bytes

__all__ = ["EpochReport", "EpochStart", "FailoverEvent", "SubtaskRestoreEvent"]


@dataclass(frozen=True)
class EpochStart:
    """An epoch run is about to start (what fault injection and tools see on the driver).

    ``placement`` maps each keyed stage's first operator id to the executor id each of its
    subtasks is placed on (empty before the first run of the job).
    """

    job_id: str
    epoch: int
    run: int
    placement: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class SubtaskRestoreEvent:
    """A keyed subtask restored its state by itself (the rest of the job went on)."""

    epoch: int
    operator_id: str
    subtask: int
    executor_id: str
    cause: str  # why it had no usable local state
    changelog_entries: int  # epochs of changes replayed over the checkpoint
    seconds: float


@dataclass(frozen=True)
class FailoverEvent:
    """A whole-job rollback: every subtask restored from ``checkpoint_id`` (None: from the
    start), sources rewound, uncommitted sink output aborted."""

    epoch: int  # the epoch that failed
    incarnation: int  # the incarnation the job continued with
    checkpoint_id: int | None
    cause: str


@dataclass(frozen=True)
class EpochReport:
    """One finished epoch.

    ``runs`` counts the Spark jobs the epoch took (more than one when a run was discarded
    because a subtask had lost its state). ``keyed_tasks`` counts keyed subtasks of the
    accepted run and ``on_preferred_executor`` those that ran where the driver placed them.
    ``uploads_in_flight`` counts asynchronous snapshot uploads still running when the epoch
    ended, ``uploads_completed`` those whose end it learnt of (``None``: not counted).
    ``changelog_bytes`` is the size of the epoch's stored changelog entries (what
    per-subtask recovery costs per epoch; 0 when no entry was needed).
    """

    epoch: int
    runs: int
    seconds: float
    records_in: int
    keyed_tasks: int
    on_preferred_executor: int
    subtask_restores: tuple[SubtaskRestoreEvent, ...] = ()
    failover: FailoverEvent | None = None  # the failover this epoch restored from
    checkpoint_id: int | None = None
    uploads_in_flight: int | None = None
    uploads_completed: int | None = None
    changelog_bytes: int = 0
    # Source operator id -> split -> records available and not yet read after the epoch
    # (Kafka's consumer lag per partition; sources that cannot tell are left out).
    consumer_lag: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @property
    def total_lag(self) -> int | None:
        """The consumer lag summed over every split (None: no source reports one)."""
        if not self.consumer_lag:
            return None
        return sum(n for lag in self.consumer_lag.values() for n in lag.values())

    def to_json(self) -> dict[str, Any]:
        """A compact JSON form (kept in checkpoints, shown by the CLI)."""
        return {
            "epoch": self.epoch,
            "runs": self.runs,
            "keyed_tasks": self.keyed_tasks,
            "on_preferred_executor": self.on_preferred_executor,
            "subtask_restores": [
                {
                    "operator": r.operator_id,
                    "subtask": r.subtask,
                    "executor": r.executor_id,
                    "changelog_epochs": r.changelog_entries,
                    "cause": r.cause,
                }
                for r in self.subtask_restores
            ],
            "failover": None if self.failover is None else dataclasses.asdict(self.failover),
            "uploads_in_flight": self.uploads_in_flight,
            "uploads_completed": self.uploads_completed,
            "changelog_bytes": self.changelog_bytes,
            "consumer_lag": {op: dict(lag) for op, lag in self.consumer_lag.items()},
        }

    def describe(self) -> str:
        """One line for logs and consoles."""
        text = (
            f"epoch {self.epoch}: {self.records_in} records in {self.seconds:.2f}s, "
            f"{self.on_preferred_executor}/{self.keyed_tasks} keyed tasks on their executor"
        )
        if self.runs > 1:
            text += f", {self.runs} runs"
        if self.total_lag is not None:
            text += f", lag {self.total_lag}"
        if self.checkpoint_id is not None:
            text += f", checkpoint {self.checkpoint_id}"
        if self.uploads_in_flight or self.uploads_completed:
            text += (
                f", uploads: {self.uploads_in_flight or 0} running, "
                f"{self.uploads_completed or 0} done"
            )
        if self.changelog_bytes:
            text += f", changelog {format_bytes(self.changelog_bytes)}"
        if self.failover is not None:
            f = self.failover
            source = f"checkpoint {f.checkpoint_id}" if f.checkpoint_id else "the start"
            text += f", after a whole-job failover to {source} ({f.cause})"
        for r in self.subtask_restores:
            text += (
                f", subtask restore {r.operator_id}#{r.subtask} on executor {r.executor_id} "
                f"({r.changelog_entries} changelog epochs, {r.seconds:.2f}s: {r.cause})"
            )
        return text
