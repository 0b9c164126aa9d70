"""Jobs and fault injectors of the Spark writer sink tests (importable by Python workers)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from sparkpoint.connectors.spark_writer import SparkWriterSink
from sparkpoint.testing import FailureInjector
from tests.runtime.jobs.reference import counted_pairs

SCHEMA = "kind STRING, k BIGINT, a BIGINT, b BIGINT"


def pad(record: tuple[Any, ...]) -> tuple[Any, ...]:
    """``("rec", k, x)`` and ``("final", k, count, sum)`` as rows of ``SCHEMA``."""
    return record if len(record) == 4 else (*record, None)


def writer_job(
    env: Any,
    sink: SparkWriterSink,
    n_events: int,
    n_keys: int,
    map_injector: FailureInjector | None = None,
) -> None:
    """numbers -> (x % keys, x) -> key_by -> CountAndEcho -> pad -> ``sink``."""
    (
        counted_pairs(env, n_events, n_keys, map_injector=map_injector)
        .map(pad)
        .uid("pad")
        .sink_to(sink)
        .uid("sink")
    )


def expected_rows(n_events: int, n_keys: int) -> list[tuple[Any, ...]]:
    """Every row the job must write, sorted."""
    rows = [("rec", x % n_keys, x, None) for x in range(n_events)]
    finals: dict[int, tuple[int, int]] = {}
    for x in range(n_events):
        c, s = finals.get(x % n_keys, (0, 0))
        finals[x % n_keys] = (c + 1, s + x)
    rows += [("final", k, c, s) for k, (c, s) in finals.items()]
    return sorted(rows, key=repr)


class CommitStepFault:
    """Fails the driver at one commit step, ``times`` times in all (``raise`` or ``kill``)."""

    def __init__(
        self, directory: str, step: str, times: int = 1, mode: str = "raise", skip: int = 0
    ) -> None:
        self.step = step
        self.injector = FailureInjector(directory, 0, times, mode)
        self.skip = skip  # commits that pass the step before the first failure

    def __call__(self, step: str, cid: str) -> None:
        if step != self.step:
            return
        if self.skip > 0:
            self.skip -= 1
            return
        self.injector.maybe_fail(0)

    def fired(self) -> int:
        """How many failures fired."""
        return self.injector.fired()


class CommitFaults:
    """Several ``CommitStepFault``s at once."""

    def __init__(self, faults: list[CommitStepFault]) -> None:
        self.faults = faults

    def __call__(self, step: str, cid: str) -> None:
        for f in self.faults:
            f(step, cid)


class FailWriteTaskOnce:
    """A ``transform`` that fails one task of the Spark write job once (Spark retries it)."""

    def __init__(self, directory: str) -> None:
        self.injector = FailureInjector(directory, 0, 1, "raise")

    def __call__(self, df: Any) -> Any:
        injector = self.injector

        def fail_once(batches: Iterator[Any]) -> Iterator[Any]:
            for batch in batches:
                if batch.num_rows:
                    injector.maybe_fail(0)
                yield batch

        return df.mapInArrow(fail_once, df.schema)

    def fired(self) -> int:
        """How many failures fired."""
        return self.injector.fired()


def read_parquet_rows(spark: Any, path: str) -> list[tuple[Any, ...]]:
    """The rows readers of ``path`` see (the commit partition column dropped), sorted."""
    if not os.path.isdir(path):
        return []
    df = spark.read.parquet(path)
    rows = [tuple(r) for r in df.select("kind", "k", "a", "b").collect()]
    return sorted(rows, key=repr)
