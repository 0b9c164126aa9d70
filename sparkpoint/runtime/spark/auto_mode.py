"""``sparkpoint.epoch.mode=auto``: epochs in long-running tasks while the job has its Spark
application's task slots to itself, a Spark job per epoch otherwise.

The long-running tasks hold every task slot of the cluster, so a job uses them only while
no other sparkpoint job runs in the same driver (``job_started``/``job_ended``) and no
other Spark job of the application is active, and only if its stages allow them (no slot
sharing group resources) and none of its sources or sinks runs Spark jobs of its own
(``runs_spark_jobs``: a streaming query, a batch writer). A watcher gives the slots back
between runs, within ``_CHECK_S``, once another job appears (also while the job waits for
input), and the job takes them again after ``_SETTLE_S`` without one. A launch that cannot
get every slot in time (other Spark jobs hold slots, or the executors cannot reach the
driver) falls back to a Spark job per epoch for the rest of the job, with a warning. Both
runners give a run the same results, so switching between runs changes latency only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from sparkpoint.runtime.graph import Plan
from sparkpoint.runtime.protocol import EpochSpec, JobSpec, TaskReport
from sparkpoint.runtime.spark.epoch import EpochRunner, job_group
from sparkpoint.runtime.spark.long_running import LaunchFailed, LongRunningRunner

__all__ = ["AutoRunner", "job_ended", "job_started"]

_LOG = logging.getLogger(__name__)
_SETTLE_S = 30.0  # a Spark job per epoch for at least this long after another job
_CHECK_S = 1.0  # how often the application's other jobs are looked up
_LAUNCH_TIMEOUT_S = 15.0

_lock = threading.Lock()
_jobs: dict[str, set[str]] = {}  # application id -> sparkpoint jobs running in it


def job_started(application_id: str, job_id: str) -> None:
    """A sparkpoint job of this driver started running in ``application_id``."""
    with _lock:
        _jobs.setdefault(application_id, set()).add(job_id)


def job_ended(application_id: str, job_id: str) -> None:
    """The job ended (it gave back its task slots)."""
    with _lock:
        _jobs.get(application_id, set()).discard(job_id)


def _other_sparkpoint_jobs(application_id: str, job_id: str) -> bool:
    with _lock:
        return bool(_jobs.get(application_id, set()) - {job_id})


def _runs_spark_jobs(plan: Plan) -> bool:
    sources = [st.source.source for st in plan.stages if st.source is not None]
    sinks = [node.sink for node in plan.sinks]
    return any(getattr(c, "runs_spark_jobs", False) for c in [*sources, *sinks])


class AutoRunner:
    """Runs each epoch in long-running tasks or as a Spark job (the calls of
    ``EpochRunner``), as the module's doc says."""

    def __init__(
        self, spark: Any, plan: Plan, tasks_per_core: int = 2, full_range: int | None = None
    ) -> None:
        self._spark = spark
        self._jobs = EpochRunner(spark, plan, tasks_per_core, full_range)
        self.cluster = self._jobs.cluster
        self.plan = plan
        self.full_range = full_range
        self._long: LongRunningRunner | None = None
        never = bool(self._jobs.profiles) or _runs_spark_jobs(plan)
        self._job_mode_until = float("inf") if never else 0.0
        self._job_id: str | None = None
        self._running = threading.Lock()  # held by a run: the slots are given back between
        self._closed = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def long_running(self) -> bool:
        """Whether the next epoch would run in long-running tasks (the epoch pacer asks;
        a launch can still fail and run it as a Spark job)."""
        return self._long is not None or time.monotonic() >= self._job_mode_until

    def run(
        self, spec: EpochSpec, locations: Mapping[int, list[str]], watch: set[str]
    ) -> list[TaskReport]:
        """Run the epoch in the mode chosen now (``EpochRunner.run``'s contract)."""
        with self._running:
            self._job_id = spec.job.job_id
            if self._long is None and self._may_launch():
                self._long = LongRunningRunner(
                    self._spark, self.plan, 1, self.full_range, _LAUNCH_TIMEOUT_S, self._jobs
                )
                self._watch()
            long = self._long
            if long is not None:
                try:
                    return long.run(spec, locations, watch)
                except LaunchFailed as exc:  # slots held elsewhere, or the driver unreachable
                    self._to_job_mode(str(exc))
                    self._job_mode_until = float("inf")
                    _LOG.warning("Epochs run as Spark jobs from now on: %s", exc)
            return self._jobs.run(spec, locations, watch)

    def _may_launch(self) -> bool:
        if time.monotonic() < self._job_mode_until:
            return False
        why = self._others()
        if why is not None:
            self._to_job_mode(why)
        return why is None

    def _others(self) -> str | None:
        """Why the slots are not the job's alone now, or None."""
        job_id = self._job_id
        if job_id is None:
            return None
        if _other_sparkpoint_jobs(self.cluster.application_id, job_id):
            return "another sparkpoint job runs in this Spark application"
        tracker = self.cluster.sc.statusTracker()
        ours = set(tracker.getJobIdsForGroup(job_group(job_id)))
        if set(tracker.getActiveJobsIds()) - ours:
            return "other Spark jobs are active in this Spark application"
        return None

    def _watch(self) -> None:
        """Start the watcher that gives the slots back between runs (once per runner)."""
        if self._watcher is not None:
            return

        def loop() -> None:
            while not self._closed.wait(_CHECK_S):
                if self._long is None:
                    continue
                why = self._others()
                if why is None:
                    continue
                with self._running:
                    if self._long is not None and not self._closed.is_set():
                        self._to_job_mode(why)

        self._watcher = threading.Thread(target=loop, daemon=True, name="sparkpoint-auto-mode")
        self._watcher.start()

    def _to_job_mode(self, why: str) -> None:
        self._job_mode_until = time.monotonic() + _SETTLE_S
        long, self._long = self._long, None
        if long is not None:
            _LOG.info("Epochs run as Spark jobs for at least %.0f s: %s", _SETTLE_S, why)
            long.close()  # gives the task slots back

    def cleanup(
        self, job: JobSpec, executors: Mapping[str, str], aborted: frozenset[int] = frozenset()
    ) -> int:
        """Stop the long-running tasks (if any), then delete the job's local state."""
        self._closed.set()
        with self._running:
            long, self._long = self._long, None
        if long is not None:
            long.close()
        return self._jobs.cleanup(job, executors, aborted)
