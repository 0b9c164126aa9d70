"""``CheckpointingMode.AT_LEAST_ONCE``: sinks publish each epoch's output when the epoch ends,
not when a checkpoint covering it completes; after a failover the output published since
the last completed checkpoint is published again. EXACTLY_ONCE is the control.

Parallelism 1, 10 records per epoch, a ``ManualClock`` that makes exactly one checkpoint due
(it covers epochs 1-4), and a failure injected at the start of epoch 7.
"""

from __future__ import annotations

from typing import Any

import pytest

from sparkpoint.common import Configuration, Encoder, RestartStrategies
from sparkpoint.connectors.number_seq import NumberSequenceSource
from sparkpoint.datastream import CheckpointingMode, StreamExecutionEnvironment
from sparkpoint.datastream.connectors.file_system import FileSink
from sparkpoint.testing import EpochStart, Faults, ManualClock
from tests.runtime.jobs.reference import read_sink

N = 100
PER_EPOCH = 10


def _run(
    env: StreamExecutionEnvironment, tmp_path: Any, mode: CheckpointingMode, fail_at: int | None
) -> tuple[Any, dict[int, int], list[int]]:
    """Run the job; returns the result, the committed line count seen when each epoch
    started (first run), and the epochs at which the injected failure fired."""
    out = str(tmp_path / "out")
    env.set_parallelism(1)
    env.configure(
        Configuration().set_string("sparkpoint.epoch.max-records-per-split", str(PER_EPOCH))
    )
    clock = ManualClock(1_000_000)
    env.set_clock(clock)
    env.enable_checkpointing(1000, mode)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ckpt").as_uri())
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
    visible: dict[int, int] = {}
    fired: list[int] = []

    def at_start(event: EpochStart) -> None:
        visible.setdefault(event.epoch, len(read_sink(out)))
        if event.epoch == 3:
            clock.advance(1000)  # the one checkpoint: due from here, attached to epoch 4
        if fail_at is not None and event.epoch == fail_at and not fired:
            fired.append(event.epoch)
            raise RuntimeError("injected failure")

    env.set_fault_injection(Faults().on_epoch_start(at_start))
    (
        env.from_source(NumberSequenceSource(0, N - 1), None, "numbers")
        .uid("numbers")
        .map(lambda x: x * 2)
        .uid("double")
        .sink_to(FileSink.for_row_format(out, Encoder.simple_string_encoder()).build())
        .uid("sink")
    )
    result = env.execute("at-least-once")
    return result, visible, fired


def _checkpointed_epochs(result: Any) -> list[int]:
    return [r.epoch for r in result.epoch_reports if r.checkpoint_id is not None]


@pytest.mark.parametrize("mode", [CheckpointingMode.EXACTLY_ONCE, CheckpointingMode.AT_LEAST_ONCE])
def test_when_output_becomes_visible(
    env: StreamExecutionEnvironment, tmp_path: Any, mode: CheckpointingMode
) -> None:
    result, visible, _ = _run(env, tmp_path, mode, None)
    assert _checkpointed_epochs(result) == [4]
    assert sorted(read_sink(str(tmp_path / "out"))) == [2 * x for x in range(N)]
    epochs = range(1, N // PER_EPOCH + 1)
    if mode is CheckpointingMode.AT_LEAST_ONCE:
        # Published when each epoch ends: epoch e starts with e - 1 epochs visible.
        assert [visible[e] for e in epochs] == [(e - 1) * PER_EPOCH for e in epochs]
    else:
        # Published only by the checkpoint of epoch 4 (then by the end of input).
        assert [visible[e] for e in epochs] == [0] * 4 + [4 * PER_EPOCH] * 6


@pytest.mark.parametrize("mode", [CheckpointingMode.EXACTLY_ONCE, CheckpointingMode.AT_LEAST_ONCE])
def test_output_after_a_failover(
    env: StreamExecutionEnvironment, tmp_path: Any, mode: CheckpointingMode
) -> None:
    result, _, fired = _run(env, tmp_path, mode, 7)
    assert fired == [7]
    assert len(result.failovers) == 1
    lines = sorted(read_sink(str(tmp_path / "out")))
    expected = [2 * x for x in range(N)]
    if mode is CheckpointingMode.AT_LEAST_ONCE:
        # Epochs 5 and 6 (records 40..59) were published, then replayed from the checkpoint
        # of epoch 4 and published again: at least once, never lost.
        assert lines == sorted(expected + [2 * x for x in range(40, 60)])
    else:
        assert lines == expected
