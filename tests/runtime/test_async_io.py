"""Async I/O across a failover: every input's result reaches the exactly-once sink once, and
the requests re-issued are exactly those of the epochs replayed after the checkpoint (an
epoch completes all its requests before it ends: none is in flight at a checkpoint).

Parallelism 1, 10 records per epoch, a ``ManualClock`` that makes one checkpoint due (it
covers epochs 1-4), and a failure injected when epoch 7 starts. Every request writes a file
named after its input, so the test counts requests across Python workers and attempts.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import Counter
from typing import Any

from sparkpoint.common import Configuration, Encoder, RestartStrategies, Time, Types
from sparkpoint.connectors.number_seq import NumberSequenceSource
from sparkpoint.datastream import (
    AsyncDataStream,
    AsyncFunction,
    StreamExecutionEnvironment,
)
from sparkpoint.datastream.connectors.file_system import FileSink
from sparkpoint.testing import EpochStart, Faults, ManualClock
from tests.runtime.jobs.reference import read_sink

N = 100
PER_EPOCH = 10


class CountedLookup(AsyncFunction):
    """Records every request as a file ``<value>.<uuid>`` in ``directory``."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    async def async_invoke(self, value: int) -> list[int]:
        with open(os.path.join(self.directory, f"{value}.{uuid.uuid4().hex}"), "x"):
            pass
        await asyncio.sleep(0.001 * (value % 3))
        return [value * value]


def _requests(directory: str) -> Counter[int]:
    return Counter(int(name.split(".")[0]) for name in os.listdir(directory))


def test_requests_across_a_failover(env: StreamExecutionEnvironment, tmp_path: Any) -> None:
    requests = tmp_path / "requests"
    requests.mkdir()
    out = str(tmp_path / "out")
    env.set_parallelism(1)
    env.configure(
        Configuration().set_string("sparkpoint.epoch.max-records-per-split", str(PER_EPOCH))
    )
    clock = ManualClock(1_000_000)
    env.set_clock(clock)
    env.enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ckpt").as_uri())
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
    fired: list[int] = []

    def at_start(event: EpochStart) -> None:
        if event.epoch == 3:
            clock.advance(1000)  # the one checkpoint: attached to epoch 4
        if event.epoch == 7 and not fired:
            fired.append(event.epoch)
            raise RuntimeError("injected failure")

    env.set_fault_injection(Faults().on_epoch_start(at_start))
    numbers = env.from_source(NumberSequenceSource(0, N - 1), None, "numbers").uid("numbers")
    (
        AsyncDataStream.unordered_wait(
            numbers,
            CountedLookup(str(requests)),
            Time.seconds(10),
            capacity=4,
            output_type=Types.LONG(),
        )
        .uid("lookup")
        .sink_to(FileSink.for_row_format(out, Encoder.simple_string_encoder()).build())
        .uid("sink")
    )
    result = env.execute("async-failover")
    assert fired == [7]
    assert len(result.failovers) == 1
    assert [r.epoch for r in result.epoch_reports if r.checkpoint_id is not None][:1] == [4]
    # Every result exactly once in the exactly-once sink.
    assert sorted(read_sink(out)) == [v * v for v in range(N)]
    # Requests of checkpointed epochs (0..39) were issued once and never again; those of the
    # epochs replayed after the restore (5 and 6: 40..59) twice; the rest once.
    assert _requests(str(requests)) == Counter({v: 2 if 40 <= v < 60 else 1 for v in range(N)})
