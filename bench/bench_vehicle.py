"""Per-epoch cost of the epoch vehicle: the RDD path sparkpoint uses against the DataFrame
path it replaced, on the same synthetic epochs in one process (``local[2]`` by default).

An epoch here is the shape of a keyed count: ``U`` source tasks each produce groups of
``(key, value)`` records for ``P`` keyed subtasks (pickled groups of up to 8,192 records),
the records move to their subtask, and each subtask unpickles and counts them; the driver
collects one small row per subtask. No state, no sparkpoint runtime: only the vehicle.

- ``dataframe``: ``spark.range(U).mapInArrow(source)`` -> ``repartitionById(P, sub)`` ->
  ``mapInArrow(keyed)`` -> ``collect`` (sparkpoint before executor affinity);
- ``rdd_pinned``: an RDD of ``U`` empty elements -> ``mapPartitionsWithIndex(source)`` ->
  ``partitionBy(P)`` zipped behind a pinned RDD (every partition prefers an executor) ->
  ``mapPartitionsWithIndex(keyed)`` -> ``collect`` (sparkpoint now);
- ``rdd_unpinned``: the same without the pinned RDD (the cost of the pinning alone).

Each vehicle runs every repetition in turn (interleaved); JSON lines give the median and
minimum per-epoch time and the ratio to ``dataframe``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GROUP = 8192


def make_groups(split: int, per_split: int, subtasks: int) -> dict[int, list[bytes]]:
    """Pickled groups of ``(key, value)`` per subtask, as a source task would route them."""
    by_sub: dict[int, list[tuple[int, int]]] = {s: [] for s in range(subtasks)}
    for v in range(split * per_split, (split + 1) * per_split):
        by_sub[v % subtasks].append((v % 1000, v))
    return {
        s: [pickle.dumps((vs[i : i + GROUP], None), 5) for i in range(0, len(vs), GROUP)]
        for s, vs in by_sub.items()
    }


def count(payloads: list[bytes]) -> int:
    return sum(len(pickle.loads(p)[0]) for p in payloads)


def dataframe_vehicle(spark: Any, events: int, p: int, u: int) -> Callable[[], int]:
    import pyarrow as pa

    schema = pa.schema([("sub", pa.int32()), ("kind", pa.int8()), ("payload", pa.binary())])
    per_split = events // u

    def batch(rows: list[tuple[int, int, bytes]]) -> pa.RecordBatch:
        subs, kinds, pays = zip(*rows)
        return pa.RecordBatch.from_arrays(
            [pa.array(subs, pa.int32()), pa.array(kinds, pa.int8()), pa.array(pays, pa.binary())],
            schema=schema,
        )

    def source(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        for _ in batches:
            pass
        task = TaskContext.get()
        assert task is not None  # a Spark task runs this
        groups = make_groups(task.partitionId(), per_split, p)
        yield batch([(s, 0, g) for s, gs in groups.items() for g in gs])

    def keyed(batches: Iterator[Any]) -> Iterator[Any]:
        payloads = [x for b in batches for x in b.column(2).to_pylist()]
        yield batch([(0, 5, pickle.dumps(count(payloads)))])

    ddl = "sub int, kind byte, payload binary"

    def run() -> int:
        df = spark.range(0, u, 1, u).mapInArrow(source, ddl)
        out = df.repartitionById(p, "sub").mapInArrow(keyed, ddl).collect()
        return sum(pickle.loads(bytes(r[2])) for r in out)

    return run


def rdd_vehicle(spark: Any, events: int, p: int, u: int, pinned: bool) -> Callable[[], int]:
    from pyspark import RDD
    from pyspark.serializers import NoOpSerializer

    from sparkpoint.runtime.spark.cluster import SparkCluster
    from sparkpoint.runtime.spark.epoch import subtask_of

    cluster = SparkCluster(spark)
    executors = sorted(cluster.live_executors().values(), key=lambda e: e.executor_id)
    locations = [executors[i % len(executors)].location for i in range(p)]
    sc = spark.sparkContext
    per_split = events // u

    def source(split: int, items: Iterator[Any]) -> Iterator[Any]:
        for _ in items:
            pass
        groups = make_groups(split, per_split, p)
        return iter([(s, groups[s]) for s in range(p)])

    def keyed_pinned(_split: int, frames: Iterator[bytes]) -> Iterator[int]:
        payloads = []
        for i, frame in enumerate(frames):
            if i % 2:
                for _sub, groups in pickle.loads(frame):
                    payloads.extend(groups)
        yield count(payloads)

    def keyed(_split: int, items: Iterator[Any]) -> Iterator[int]:
        yield count([g for _sub, groups in items for g in groups])

    def run() -> int:
        base: Any = RDD(cluster.base_rdd(u), sc, NoOpSerializer())
        shuffled = base.mapPartitionsWithIndex(source).partitionBy(p, subtask_of)
        if not pinned:
            return sum(shuffled.mapPartitionsWithIndex(keyed).collect())
        zipped: Any = RDD(
            cluster.pinned_rdd(locations, u).zip(shuffled._jrdd), sc, NoOpSerializer()
        )
        return sum(zipped.mapPartitionsWithIndex(keyed_pinned).collect())

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--events", type=int, default=200_000, help="per epoch")
    parser.add_argument("--parallelism", type=int, nargs="+", default=[2, 16])
    parser.add_argument("--splits", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    from sparkpoint.runtime.spark.session import get_spark_session

    spark = get_spark_session(args.master)
    for p in args.parallelism:
        vehicles = {
            "dataframe": dataframe_vehicle(spark, args.events, p, args.splits),
            "rdd_pinned": rdd_vehicle(spark, args.events, p, args.splits, True),
            "rdd_unpinned": rdd_vehicle(spark, args.events, p, args.splits, False),
        }
        times: dict[str, list[float]] = {name: [] for name in vehicles}
        for run in vehicles.values():  # warm up, and check the counts
            assert run() == args.events // args.splits * args.splits
        for _ in range(args.repeats):
            for name, run in vehicles.items():
                t0 = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - t0)
        base = statistics.median(times["dataframe"])
        for name, ts in times.items():
            print(
                json.dumps(
                    {
                        "bench": "vehicle",
                        "vehicle": name,
                        "master": args.master,
                        "events_per_epoch": args.events,
                        "parallelism": p,
                        "splits": args.splits,
                        "median_ms": round(1000 * statistics.median(ts), 1),
                        "min_ms": round(1000 * min(ts), 1),
                        "vs_dataframe": round(statistics.median(ts) / base, 3),
                    }
                ),
                flush=True,
            )
    spark.stop()


if __name__ == "__main__":
    main()
