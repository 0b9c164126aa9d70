"""Windows on the runtime: exact results under injected failures, after savepoint restores
at other parallelisms (heap and RocksDB), allowed lateness with late data to a side output
across epochs, and processing-time windows on a manual clock."""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any

import pytest

from sparkpoint.common import Configuration, RestartStrategies, Time, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.connectors.sink import CollectSink
from sparkpoint.datastream import (
    EmbeddedRocksDBStateBackend,
    FileSystemCheckpointStorage,
    OutputTag,
    ProcessWindowFunction,
    StreamExecutionEnvironment,
)
from sparkpoint.datastream.functions import ProcessAllWindowFunction
from sparkpoint.datastream.window import (
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from sparkpoint.testing import EpochStart, FailureInjector, Faults, ManualClock
from tests.runtime.jobs.reference import read_sink
from tests.runtime.jobs.window_jobs import KINDS, event_time, expected_output, windowed_job

N_EVENTS = 8_000  # 16 epochs of 500: the fault at record 7,301 falls in the 15th


def _read(out_root: str) -> dict[str, list[tuple[Any, ...]]]:
    return {kind: sorted(read_sink(os.path.join(out_root, kind)), key=repr) for kind in KINDS}


def _assert_exact(out_root: str, n_events: int) -> None:
    got = _read(out_root)
    want = expected_output(n_events)
    for kind in KINDS:
        dupes = [line for line, n in Counter(got[kind]).items() if n > 1]
        assert not dupes, f"{kind}: duplicated results {dupes[:3]}"
        assert got[kind] == want[kind], (
            f"{kind}: {len(got[kind])} results, {len(want[kind])} expected"
        )


def _configure(env: Any, tmp_path: Any, backend: str, split: int = 500) -> None:
    env.enable_checkpointing(10)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage(
            (tmp_path / "ckpt").as_uri(), savepoint_path=(tmp_path / "sp").as_uri()
        )
    )
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    # 500 records per epoch: savepoint stops fall at x % 1000 in {0, 500}, inside sessions.
    env.configure({"sparkpoint.epoch.max-records-per-split": str(split)})
    if backend == "rocksdb":
        env.set_state_backend(EmbeddedRocksDBStateBackend(True))


def test_expected_output_model_has_merges_and_every_kind() -> None:
    """The reference model is not trivial: every kind yields results, sessions span several
    records (merged windows), and records are out of order in event time."""
    want = expected_output(N_EVENTS)
    assert all(len(want[k]) >= 15 for k in KINDS)
    assert max(s[4] for s in want["session"]) > 100
    assert any(event_time(x + 1) < event_time(x) for x in range(20))


@pytest.mark.parametrize(
    ("backend", "mode", "times"),
    [
        ("heap", "raise", 1),
        ("heap", "raise", 4),
        ("heap", "kill", 1),
        ("heap", "kill", 4),
        ("rocksdb", "raise", 4),
        ("rocksdb", "kill", 1),
    ],
    ids=[
        "heap-exception-retry",
        "heap-exception-restore",
        "heap-kill-retry",
        "heap-kill-restore",
        "rocksdb-exception-restore",
        "rocksdb-kill-retry",
    ],
)
def test_windows_exact_under_failures(
    env: Any, tmp_path: Any, backend: str, mode: str, times: int
) -> None:
    """A user exception or a SIGKILL of the Python worker inside the window operator: one
    is absorbed by Spark's task retry, four exhaust it and the job restores from the latest
    checkpoint. Every window result appears exactly once with its exact value."""
    inj = FailureInjector(str(tmp_path / "inj"), at_record=7_301, times=times, mode=mode)
    _configure(env, tmp_path, backend)
    out_root = str(tmp_path / "out")
    windowed_job(env, out_root, N_EVENTS, injector=inj)
    result = env.execute("windows-faults")
    assert inj.fired() == times
    assert result.restarts == (1 if times == 4 else 0)
    assert any(s.status == "COMPLETED" for s in result.checkpoints)
    _assert_exact(out_root, N_EVENTS)


def _env(
    spark: Any,
    tmp_path: Any,
    parallelism: int,
    backend: str,
    restore: str | None = None,
    split: int = 500,
) -> Any:
    conf = Configuration()
    conf.set_string("sparkpoint.local-state.dir", str(tmp_path / f"local-{parallelism}"))
    if restore is not None:
        conf.set_string("execution.savepoint.path", restore)
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(parallelism)
    _configure(env, tmp_path, backend, split)
    return env


def _stop_after(env: Any, epochs: int) -> tuple[str, int]:
    """Run until ``epochs`` epochs ran, stop with a savepoint; returns it and the source
    position (records read) at the stop."""
    client = env.execute_async("windows-rescale")
    master = client.job_master
    while master.progress.epochs_run < epochs:
        assert not client.get_job_execution_result().done(), "job ended before the stop"
        time.sleep(0.05)
    path = client.stop_with_savepoint(False).result(timeout=120)
    client.wait(timeout=120)
    assert master.status == "FINISHED"
    (enum,) = master.split_enumerators().values()
    (split,) = enum.splits.values()
    return str(path), int(split.position)


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_windows_savepoint_restore_at_parallelism_2_3_1(
    spark: Any, tmp_path: Any, backend: str
) -> None:
    """Stop with a savepoint at parallelism 2, resume at 3, stop again, finish at 1: window
    contents, merging-window sets and timers move with their key groups, and sessions that
    were open at a savepoint keep merging after the restore."""
    out_root = str(tmp_path / "out")
    env = _env(spark, tmp_path, 2, backend)
    windowed_job(env, out_root, N_EVENTS)
    sp1, pos1 = _stop_after(env, 4)
    env = _env(spark, tmp_path, 3, backend, restore=sp1)
    windowed_job(env, out_root, N_EVENTS)
    sp2, pos2 = _stop_after(env, 4)
    # the rest of the input in a few large epochs (records per epoch are a driver setting)
    env = _env(spark, tmp_path, 1, backend, restore=sp2, split=10_000)
    windowed_job(env, out_root, N_EVENTS)
    env.execute("windows-rescale-final")
    assert 0 < pos1 < pos2 < N_EVENTS
    _assert_exact(out_root, N_EVENTS)
    # A session open at each savepoint took records from both sides of it.
    sessions = _read(out_root)["session"]
    for pos in (pos1, pos2):
        cut = event_time(pos)
        assert any(s[2] < cut - 20 and s[3] > cut + 20 for s in sessions), pos


class _Ts(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


class _SumAll(ProcessAllWindowFunction):
    def process(self, context: Any, elements: Any) -> Any:
        w = context.window()
        yield ("all", w.start, sum(e[1] for e in elements))


def test_allowed_lateness_and_late_data_side_output(env: Any) -> None:
    """One record per epoch, so the watermark advances between records: a record within
    the allowed lateness fires its (already fired) window again with the updated result; a
    record later than that goes to the late-data side output; window_all likewise."""
    env.set_parallelism(1)
    env.configure(Configuration().set_string("sparkpoint.epoch.max-records-per-split", "1"))
    data = [("a", 100), ("a", 2000), ("a", 150), ("a", 3000), ("a", 160)]
    ds = env.from_collection(data).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_Ts())
    )
    late = OutputTag("late")
    late_all = OutputTag("late-all")
    keyed = (
        ds.key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(1000)))
        .allowed_lateness(1500)
        .side_output_late_data(late)
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
    )
    every = (
        ds.window_all(TumblingEventTimeWindows.of(Time.milliseconds(1000)))
        .allowed_lateness(1500)
        .side_output_late_data(late_all)
        .process(_SumAll())
    )
    sinks = {name: CollectSink() for name in ("keyed", "late", "all", "late-all")}
    keyed.sink_to(sinks["keyed"])
    keyed.get_side_output(late).sink_to(sinks["late"])
    every.sink_to(sinks["all"])
    every.get_side_output(late_all).sink_to(sinks["late-all"])
    env.execute("lateness")
    # [0,1000) fires at watermark 1999 with 100, again when 150 arrives (late but allowed),
    # is cleaned up at 2499; 160 then arrives after the cleanup: late data.
    assert sinks["keyed"].collected == [("a", 100), ("a", 250), ("a", 2000), ("a", 3000)]
    assert sinks["late"].collected == [("a", 160)]
    assert sinks["all"].collected == [
        ("all", 0, 100),
        ("all", 0, 250),
        ("all", 2000, 2000),
        ("all", 3000, 3000),
    ]
    assert sinks["late-all"].collected == [("a", 160)]


class _Window(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        w = context.window()
        yield (key, w.start, w.end, [e[1] for e in elements], context.current_processing_time())


def test_processing_time_windows_on_a_manual_clock(env: Any) -> None:
    """Processing-time windows take the epoch's processing time (the driver's clock); a
    window fires at the end of the first epoch whose time passes its end. A window still
    open when the bounded input ends never fires (as Flink drops pending processing-time
    timers at the end of input)."""
    env.set_parallelism(1)
    env.configure(Configuration().set_string("sparkpoint.epoch.max-records-per-split", "1"))
    clock = ManualClock(1_000_000)
    env.set_clock(clock)
    epochs: list[int] = []

    def advance(event: EpochStart) -> None:  # epoch e runs at 1_000_000 + 60 e
        epochs.append(event.epoch)
        clock.advance(60)

    env.set_fault_injection(Faults().on_epoch_start(advance))
    data = [("k", i) for i in range(5)]
    out = (
        env.from_collection(data)
        .key_by(lambda e: e[0])
        .window(TumblingProcessingTimeWindows.of(Time.milliseconds(100)))
        .process(_Window())
        .execute_and_collect()
    )
    assert epochs[:5] == [1, 2, 3, 4, 5]
    # Records at 1_000_060, _120, _180, _240, _300: windows [1_000_000, 1_000_100) gets 0,
    # [.._100, .._200) gets 1 and 2, [.._200, .._300) gets 3; 4's window never fires.
    assert list(out) == [
        ("k", 1_000_000, 1_000_100, [0], 1_000_120),
        ("k", 1_000_100, 1_000_200, [1, 2], 1_000_240),
        ("k", 1_000_200, 1_000_300, [3], 1_000_300),
    ]
