"""What the driver ships to the tasks of every run: the job's ``JobSpec`` (shared by all
epochs) and each run's ``EpochSpec`` (ranges, restores, checkpoint and the driver's view of
pending and aborted checkpoints and materializations)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkpoint.clock import Clock
from sparkpoint.connectors.source import SplitRange
from sparkpoint.fs.registry import get_options as get_fs_options
from sparkpoint.metrics.sample import MetricKey
from sparkpoint.runtime.driver.changelog_checkpoints import ChangelogCheckpoints
from sparkpoint.runtime.driver.epoch_checkpoints import EpochCheckpoints
from sparkpoint.runtime.driver.settings import JobSettings
from sparkpoint.runtime.driver.split_idleness import SplitIdleness
from sparkpoint.runtime.driver.start_state import StartState
from sparkpoint.runtime.graph import Plan
from sparkpoint.runtime.protocol import CheckpointRequest, EpochSpec, JobSpec
from sparkpoint.runtime.spark.epoch import final_stage_ids, routing
from sparkpoint.runtime.task.watermarks import MIN_WATERMARK, combined_watermark

__all__ = ["TaskSpecs"]


class TaskSpecs:
    """Builds the specs of one job's runs."""

    def __init__(
        self,
        plan: Plan,
        settings: JobSettings,
        checkpoints: EpochCheckpoints,
        changelog: ChangelogCheckpoints,
        changelog_storage: bool,
        clock: Clock,
        idleness: SplitIdleness,
    ) -> None:
        self._plan = plan
        self._idleness = idleness
        # The combined watermark shipped last: with idle splits left out of the minimum it
        # must not go back when one reads again (reset by a restore).
        self._watermark_floor = MIN_WATERMARK
        self._s = settings
        self._checkpoints = checkpoints
        self._changelog = changelog
        self._changelog_storage = changelog_storage  # whether subtasks store changelogs
        self._clock = clock
        self._finals = final_stage_ids(plan)
        self._routes = routing(plan)

    def plan_restored(self) -> None:
        """After a restore: the max parallelism may have been adopted from a checkpoint
        (re-derive routing), and the combined watermark starts from the restored ones."""
        self._routes = routing(self._plan)
        self._watermark_floor = MIN_WATERMARK

    def job_spec(self, application_id: str) -> JobSpec:
        """The spec every task of the job shares (``application_id``: Spark's)."""
        s = self._s
        return JobSpec(
            job_id=s.job_id,
            job_name=s.job_name,
            state_backend=s.state_backend,
            batch_mode=s.batch_mode,
            periodic_watermarks=s.periodic_watermarks,
            application_id=application_id,
            local_state_dir=s.local_state_dir,
            job_parameters=s.job_parameters,
            final_stage_ids=self._finals,
            routes=self._routes,
            fs_options=dict(get_fs_options()),
            changelog_storage=s.checkpoint_storage if self._changelog_storage else None,
            changelog_checkpoints=self._changelog.enabled,
            materialization_rate=s.materialization_rate,
            allow_pickle=s.pickle_allowed,
            restore_timeout_s=s.restore_timeout_ms / 1000 if s.restore_timeout_ms else None,
            faults=s.faults.task_hooks() if s.faults is not None else None,
        )

    def epoch_spec(
        self,
        job: JobSpec,
        *,
        epoch: int,
        run: int,
        prev_run: int | None,
        incarnation: int,
        end_of_input: bool,
        ranges: Mapping[int, list[SplitRange]],
        start: StartState,
        checkpoint: CheckpointRequest | None,
        metric_bases: Mapping[str, Mapping[int, Mapping[MetricKey, Any]]] | None = None,
    ) -> EpochSpec:
        """The spec of run ``run`` of ``epoch`` (``prev_run``: the run whose results the
        previous epoch used; ``metric_bases``: what the user metrics start from)."""
        idle = self._idleness.idle_keys()
        self._watermark_floor = combined_watermark(start.watermarks, idle, self._watermark_floor)
        return EpochSpec(
            job=job,
            epoch=epoch,
            run=run,
            prev_run=prev_run,
            incarnation=incarnation,
            end_of_input=end_of_input,
            watermarks=dict(start.watermarks),
            generator_state=dict(start.generators),
            idle_watermarks=idle,
            watermark_floor=self._watermark_floor,
            source_ranges=ranges,
            processing_time_ms=self._clock.now_ms(),
            checkpoint=checkpoint,
            restore=start.restore,
            operator_state=start.operator_state,
            notify_complete=self._checkpoints.notify_complete,
            pending_checkpoints=self._checkpoints.pending_ids(),
            aborted_checkpoints=self._checkpoints.recently_aborted(),
            pending_materializations=self._changelog.pending_materializations(),
            aborted_materializations=frozenset(self._changelog.aborted),
            notify_materialized=self._changelog.notify_id,
            metric_bases=metric_bases or {},
        )
