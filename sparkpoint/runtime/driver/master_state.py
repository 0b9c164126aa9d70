"""``JobMasterState``: what a checkpoint records of the driver (source positions,
watermarks, sink output not yet committed), stored as the ``sparkpoint.job`` master state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.checkpoint.metadata import CheckpointMetadata, MasterState
from sparkpoint.errors import MetadataFormatError

__all__ = ["MASTER_STATE_NAME", "JobMasterState"]

MASTER_STATE_NAME = "sparkpoint.job"


@dataclass(frozen=True)
class JobMasterState:
    """The job master's part of a checkpoint (JSON inside ``_metadata``)."""

    job_id: str
    job_name: str
    epoch: int
    sources: Mapping[str, Any] = field(default_factory=dict)  # enumerator snapshots
    watermarks: Mapping[str, int] = field(default_factory=dict)
    # max timestamp per operator@scope (scope: the split, or the subtask after a shuffle)
    generators: Mapping[str, int] = field(default_factory=dict)
    pending_sink_commits: tuple[tuple[str, list[Any]], ...] = ()
    # What the job went through since the previous checkpoint (epoch reports) and its
    # latest whole-job failovers: shown by ``sparkpoint checkpoints inspect``, never read
    # back by a restore.
    recovery: Mapping[str, Any] = field(default_factory=dict)
    # Source operator id -> split -> records not yet read when the checkpoint's epoch
    # ended (Kafka's consumer lag): shown by ``sparkpoint checkpoints``, never read back.
    source_lag: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def to_master_state(self) -> MasterState:
        """The master state written into ``_metadata``."""
        return MasterState.from_json(
            MASTER_STATE_NAME,
            {
                "job_id": self.job_id,
                "job_name": self.job_name,
                "epoch": self.epoch,
                "sources": dict(self.sources),
                "watermarks": dict(self.watermarks),
                "generators": dict(self.generators),
                "pending_sink_commits": [[op, c] for op, c in self.pending_sink_commits],
                "recovery": dict(self.recovery),
                "source_lag": {op: dict(lag) for op, lag in self.source_lag.items()},
            },
        )

    @staticmethod
    def from_metadata(metadata: CheckpointMetadata | None) -> JobMasterState | None:
        """The job master state of a checkpoint, if it has one."""
        found = metadata.get_master_state(MASTER_STATE_NAME) if metadata else None
        if found is None:
            return None
        data = found.to_json()
        try:
            return JobMasterState(
                job_id=data["job_id"],
                job_name=data["job_name"],
                epoch=int(data["epoch"]),
                sources=data["sources"],
                watermarks=data["watermarks"],
                generators=data["generators"],
                pending_sink_commits=tuple((op, c) for op, c in data["pending_sink_commits"]),
                recovery=data.get("recovery", {}),
                source_lag=data.get("source_lag", {}),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:  # from a snapshot
            raise MetadataFormatError(
                f"Master state {MASTER_STATE_NAME!r} is malformed: {type(e).__name__}: {e}"
            ) from None
