"""``SparkStreamSource``: a sparkpoint source fed by any ``spark.readStream`` DataFrame.

A Structured Streaming query (``foreachBatch``, its own Spark checkpoint) stages each
micro-batch as ``<staging>/batch-<id>``: Spark's output is written to a hidden directory and
published by one rename, once per batch id (a batch Spark replays after a crash finds its
directory published and writes nothing). The sparkpoint source has one split whose position
is the next batch id to read; sparkpoint's checkpoints record it. So Spark's checkpoint is
the truth for which records form batch N, sparkpoint's for which batches its state and
sinks have applied, and a batch is applied once however often Spark runs it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from sparkpoint.connectors.source import Boundedness, Source, SourceSplit, SplitRange
from sparkpoint.fs import get_filesystem

__all__ = ["SparkStreamSource"]

_BATCH = re.compile(r"^batch-(\d+)$")
SPLIT_ID = "spark-batches"


class SparkStreamSource(Source):
    """Records of a streaming DataFrame, as ``Row``s with its column names.

    ``staging_path`` (shared by driver and executors) holds the staged micro-batches;
    ``spark_checkpoint`` is the query's ``checkpointLocation``. Start the program again with
    the same two paths (and sparkpoint's restore pointer) to resume after a crash.
    ``end_batch`` makes the source bounded: it finishes after that batch id.
    """

    runs_spark_jobs = True  # the streaming query's micro-batches

    def __init__(
        self,
        df: Any,
        staging_path: str,
        spark_checkpoint: str,
        trigger_interval: str = "1 second",
        end_batch: int | None = None,
        max_batches_per_epoch: int = 16,
    ) -> None:
        if not getattr(df, "isStreaming", False):
            raise ValueError("SparkStreamSource needs a streaming DataFrame (spark.readStream)")
        if max_batches_per_epoch < 1:
            raise ValueError(f"max_batches_per_epoch must be >= 1, got {max_batches_per_epoch}")
        self.df: Any = df
        self.staging_path = staging_path.rstrip("/")
        self.spark_checkpoint = spark_checkpoint
        self.trigger_interval = trigger_interval
        self.end_batch = end_batch
        self.max_batches_per_epoch = max_batches_per_epoch
        self.query: Any = None
        #: Called on the driver with each batch id once it is staged (observability, faults).
        self.on_batch_staged: Callable[[int], None] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Tasks read staged files only: the DataFrame and the query stay on the driver.
        return {**self.__dict__, "df": None, "query": None, "on_batch_staged": None}

    def get_boundedness(self) -> str:
        return (
            Boundedness.BOUNDED if self.end_batch is not None else Boundedness.CONTINUOUS_UNBOUNDED
        )

    def batch_dir(self, batch_id: int) -> str:
        """Where batch ``batch_id`` is published."""
        return f"{self.staging_path}/batch-{batch_id}"

    def stage_batch(self, batch_df: Any, batch_id: int) -> None:
        """``foreachBatch``: write the batch where readers do not see it, then publish it
        by one rename, unless an earlier run of this batch id published it already."""
        if self.end_batch is not None and batch_id > self.end_batch:
            return
        fs = get_filesystem(self.staging_path)
        final = self.batch_dir(batch_id)
        if not fs.exists(final):
            tmp = f"{self.staging_path}/_tmp/batch-{batch_id}"
            batch_df.write.mode("overwrite").parquet(tmp)
            fs.rename(tmp, final)
        if self.on_batch_staged is not None:
            self.on_batch_staged(batch_id)

    def start(self) -> Any:
        """Start the streaming query (once; ``discover_splits`` calls this)."""
        if self.query is None:
            if self.df is None:
                raise RuntimeError("SparkStreamSource.start runs on the driver only")
            fs = get_filesystem(self.staging_path)
            fs.mkdirs(self.staging_path)
            self.query = (
                self.df.writeStream.foreachBatch(self.stage_batch)
                .option("checkpointLocation", self.spark_checkpoint)
                .trigger(processingTime=self.trigger_interval)
                .start()
            )
        return self.query

    def stop(self) -> None:
        """Stop the streaming query (staged batches stay)."""
        if self.query is not None:
            self.query.stop()
            self.query = None

    def discover_splits(self, parallelism: int, known: dict[str, SourceSplit]) -> list[SourceSplit]:
        self.start()
        if SPLIT_ID in known:
            return []
        return [SourceSplit(SPLIT_ID, 0, self.end_batch)]

    def _published(self) -> set[int]:
        fs = get_filesystem(self.staging_path)
        if not fs.exists(self.staging_path):
            return set()
        ids = set()
        for info in fs.list(self.staging_path):
            m = _BATCH.match(info.path.rstrip("/").rpartition("/")[2])
            if m and info.is_dir:
                ids.add(int(m.group(1)))
        return ids

    def next_range(self, split: SourceSplit, max_records: int) -> SplitRange | None:
        if self.query is not None and self.query.exception() is not None:
            raise RuntimeError(f"the Spark streaming query failed: {self.query.exception()}")
        published = self._published()
        start = end = int(split.position)
        while (
            end in published
            and end - start < self.max_batches_per_epoch
            and (self.end_batch is None or end <= self.end_batch)
        ):
            end += 1
        if end == start:
            return None
        last = self.end_batch is not None and end > self.end_batch
        return SplitRange(split.split_id, start, end, {}, last)

    def read(self, split_range: SplitRange) -> Iterator[Any]:
        import pyarrow.parquet as pq

        from sparkpoint.types import Row

        fs = get_filesystem(self.staging_path)
        for batch_id in range(split_range.start, split_range.end):
            files = sorted(
                i.path
                for i in fs.list(self.batch_dir(batch_id))
                if not i.is_dir and i.path.endswith(".parquet")
            )
            for path in files:
                with fs.open_input(path) as f:
                    table = pq.read_table(f)
                names = table.column_names
                for vals in zip(*table.to_pydict().values(), strict=True):
                    yield Row(**dict(zip(names, vals, strict=True)))
