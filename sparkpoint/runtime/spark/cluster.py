"""What the driver asks Spark about its executors, and RDDs that carry preferred locations.

PySpark has no API for either, so this goes through the SparkContext's JVM objects: the
scheduler backend's executor ids (``getExecutorIds``: the scheduler's own, current view),
the status store for each executor's host and cores, and a ``ParallelCollectionRDD`` of
empty elements whose partitions prefer given executors. Zipped with a stage's shuffled
input it makes Spark run partition ``i`` on executor ``i`` (``StateStoreRDD`` does the
same with ``getPreferredLocations``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sparkpoint.runtime.spark.placement import ExecutorSlot
from sparkpoint.runtime.task.executor import DRIVER_EXECUTOR_ID

__all__ = ["SparkCluster"]

_SEP = "\x1f"
_INTERRUPT = "spark.job.interruptOnCancel"
_GROUP = "spark.jobGroup.id"
_DESCRIPTION = "spark.job.description"


class SparkCluster:
    """The executors of one SparkContext, and RDDs pinned to them."""

    def __init__(self, spark: Any) -> None:
        self.sc = spark.sparkContext
        self._jsc = self.sc._jsc.sc()
        self._jvm = self.sc._jvm
        self._known: dict[str, ExecutorSlot] = {}
        self._pinned: dict[tuple[tuple[str, ...], int], Any] = {}
        self._class_tag = self._jvm.scala.reflect.ClassTag.AnyRef()

    @property
    def application_id(self) -> str:
        """Spark's application id (local state is kept per application and executor)."""
        return str(self.sc.applicationId)

    def executor_ids(self) -> list[str]:
        """Ids of the executors the scheduler has now (empty in local mode)."""
        text = self._jsc.getExecutorIds().mkString(_SEP)
        return [e for e in str(text).split(_SEP) if e]

    @property
    def local_mode(self) -> bool:
        """Whether the driver's JVM is the only executor (``local``, ``local[...]``)."""
        master = str(self.sc.master)
        return master == "local" or master.startswith("local[")

    def live_executors(self) -> dict[str, ExecutorSlot]:
        """Every live executor with its host and cores; in local mode the driver."""
        wanted = {DRIVER_EXECUTOR_ID} if self.local_mode else set(self.executor_ids())
        if not wanted <= set(self._known):
            self._refresh(wanted)
        return {e: self._known[e] for e in wanted if e in self._known}

    def _refresh(self, wanted: set[str]) -> None:
        summaries = self._jsc.statusStore().executorList(True).iterator()
        while summaries.hasNext():
            summary = summaries.next()
            executor_id = str(summary.id())
            if executor_id not in wanted:
                continue
            host = str(summary.hostPort()).rsplit(":", 1)[0]
            cores = int(summary.totalCores())
            if executor_id == DRIVER_EXECUTOR_ID:
                cores = max(cores, int(self.sc.defaultParallelism))
            self._known[executor_id] = ExecutorSlot(executor_id, host, max(1, cores))

    def base_rdd(self, partitions: int) -> Any:
        """A JavaRDD of ``partitions`` partitions holding one empty element each (cached,
        as ``pinned_rdd``: building it costs several Py4J calls per epoch)."""
        return self.pinned_rdd([""] * partitions, 1)

    def pinned_rdd(self, locations: Sequence[str], per_partition: int) -> Any:
        """A JavaRDD whose partition ``i`` prefers ``locations[i]`` ("" for none) and holds
        ``per_partition`` empty elements (cached: the same RDD serves many epochs)."""
        key = (tuple(locations), per_partition)
        rdd = self._pinned.get(key)
        if rdd is None:
            if len(self._pinned) > 64:
                self._pinned.clear()
            rdd = self._pinned[key] = self._parallel(len(locations), per_partition, locations)
        return rdd

    def partitions_of(self, jrdd: Any, offset: int, count: int, total: int) -> Any:
        """Partitions ``[offset, offset + count)`` of a JavaRDD of ``total`` partitions, as a
        JavaRDD (Spark's ``PartitionPruningRDD``: a narrow dependency, so the parent's
        tasks run once however many consumers read parts of it)."""
        if offset == 0 and count == total:
            return jrdd
        jvm = self._jvm
        keep = jvm.java.util.HashSet()
        for index in range(offset, offset + count):
            keep.add(index)
        # A Scala Set is a Function1[Int, Boolean]: the filter on partition indexes.
        indexes = jvm.scala.jdk.javaapi.CollectionConverters.asScala(keep)
        pruned = jvm.org.apache.spark.rdd.PartitionPruningRDD.create(jrdd.rdd(), indexes)
        return pruned.toJavaRDD()

    def _parallel(self, partitions: int, per_partition: int, locations: Sequence[str]) -> Any:
        jvm = self._jvm
        elements = jvm.java.util.Collections.nCopies(partitions * per_partition, bytearray())
        prefs = jvm.java.util.HashMap()
        for index, location in enumerate(locations):
            if location:
                one = jvm.java.util.ArrayList()
                one.add(location)
                prefs.put(index, jvm.PythonUtils.toSeq(one))
        rdd = jvm.org.apache.spark.rdd.ParallelCollectionRDD(
            self._jsc,
            jvm.PythonUtils.toSeq(elements),
            partitions,
            jvm.PythonUtils.toScalaMap(prefs),
            self._class_tag,
        )
        return jvm.org.apache.spark.api.java.JavaRDD(rdd, self._class_tag)

    def tag_jobs(self, tag: str) -> str | None:
        """Tag the Spark jobs this thread starts from now on (cancellable with
        ``cancel_tagged``, running tasks interrupted); returns the previous interrupt
        setting for ``untag_jobs``."""
        previous = self.sc.getLocalProperty(_INTERRUPT)
        self.sc.setInterruptOnCancel(True)
        self.sc.addJobTag(tag)
        return previous  # type: ignore[no-any-return]

    def untag_jobs(self, tag: str, previous_interrupt: str | None) -> None:
        """Undo ``tag_jobs`` for this thread."""
        self.sc.removeJobTag(tag)
        self.sc.setLocalProperty(_INTERRUPT, previous_interrupt)  # type: ignore[arg-type]

    def describe_jobs(self, group: str, description: str) -> tuple[str | None, str | None]:
        """Give the Spark jobs this thread starts from now on a job group and a description
        (shown by Spark's UI, status store and event log); returns the previous ones for
        ``restore_description``."""
        previous = (self.sc.getLocalProperty(_GROUP), self.sc.getLocalProperty(_DESCRIPTION))
        self.sc.setLocalProperty(_GROUP, group)
        self.sc.setLocalProperty(_DESCRIPTION, description)
        return previous

    def restore_description(self, previous: tuple[str | None, str | None]) -> None:
        """Undo ``describe_jobs`` for this thread."""
        self.sc.setLocalProperty(_GROUP, previous[0])  # type: ignore[arg-type]
        self.sc.setLocalProperty(_DESCRIPTION, previous[1])  # type: ignore[arg-type]

    def cancel_tagged(self, tag: str) -> None:
        """Cancel the running Spark jobs tagged ``tag`` (from any thread)."""
        self.sc.cancelJobsWithTag(tag)
