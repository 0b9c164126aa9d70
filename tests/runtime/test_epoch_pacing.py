"""Epoch pacing without Spark: heavy input runs at once, sparse input once per interval, no
input only when a checkpoint has something to capture or the job acts on time; the settings
resolve the interval from the checkpoint interval; a request wakes the waiting driver."""

from __future__ import annotations

import threading
import time

from sparkpoint.clock import FixedClock
from sparkpoint.connectors.source import SplitRange
from sparkpoint.runtime.driver.coordinator import CheckpointPolicy
from sparkpoint.runtime.driver.epoch_pacing import EpochPacer, acts_on_time, epoch_target_ms
from sparkpoint.runtime.driver.job_requests import RequestQueue
from sparkpoint.runtime.driver.settings import JobRequest, JobSettings, build_job_settings
from sparkpoint.runtime.graph import Node, NodeKind, Plan


def _plan(*kinds: NodeKind) -> Plan:
    nodes = [Node(i, kind, kind.value) for i, kind in enumerate(kinds)]
    return Plan(stages=[], sources=[], sinks=[], nodes=nodes)


def _settings(interval_ms: int, idle_ms: int | None = None) -> JobSettings:
    settings = JobSettings(
        "paced", 1, 128, False, CheckpointPolicy(interval_ms=1000), None, None, None
    )
    settings.epoch_mode = "job"  # a Spark job per epoch: paced by the epoch interval
    settings.epoch_interval_ms = interval_ms
    settings.idle_epoch_interval_ms = idle_ms
    settings.max_records_per_split = 100
    return settings


def _ranges(*records: int | None) -> dict[int, list[SplitRange]]:
    return {0: [SplitRange(f"s{i}", 0, 1, {}, False, n) for i, n in enumerate(records)]}


def test_sparse_input_waits_for_the_interval_heavy_input_does_not() -> None:
    clock = FixedClock(10_000)
    pacer = EpochPacer(_plan(NodeKind.SOURCE, NodeKind.REDUCE), _settings(1000), clock)
    assert pacer.wait_s(_ranges(3), False, 0, False) == 0  # the first epoch goes at once
    pacer.epoch_started()
    clock.ms += 300
    pacer.epoch_accepted(1, 3)
    assert pacer.wait_s(_ranges(5), False, 0, False) == 0.2  # polls every 0.2 s
    clock.ms += 650
    assert pacer.wait_s(_ranges(5), False, 0, False) == 0.05  # 50 ms left of the interval
    assert pacer.wait_s(_ranges(5, 100), False, 0, False) == 0  # a full split: heavy input
    assert pacer.wait_s(_ranges(None), False, 0, False) == 0  # uncounted: read at once
    clock.ms += 50
    assert pacer.wait_s(_ranges(5), False, 0, False) == 0


def test_the_interval_runs_from_planning_to_planning() -> None:
    clock = FixedClock(10_000)
    pacer = EpochPacer(_plan(NodeKind.SOURCE, NodeKind.REDUCE), _settings(1000), clock)
    planned = clock.ms
    clock.ms += 8  # reading the ranges took 8 ms
    pacer.epoch_started(planned)
    clock.ms += 990
    assert pacer.wait_s(_ranges(5), False, 0, False) == 0.002  # 1000 ms after the planning
    clock.ms += 2
    assert pacer.wait_s(_ranges(5), False, 0, False) == 0


def test_no_input_runs_an_epoch_only_when_a_checkpoint_has_something_to_capture() -> None:
    clock = FixedClock(10_000)
    pacer = EpochPacer(_plan(NodeKind.SOURCE, NodeKind.REDUCE), _settings(1000), clock)
    assert pacer.idle_interval_ms is None
    pacer.epoch_started()
    pacer.epoch_accepted(1, 7)  # epoch 1 read records
    clock.ms += 5000
    assert pacer.wait_s(_ranges(), False, 0, False) == 0.2  # no checkpoint due: wait
    assert pacer.wait_s(_ranges(), True, 0, False) == 0  # due, epoch 1 not covered
    assert pacer.wait_s(_ranges(), False, 1, True) == 0  # uploads wait for an epoch
    pacer.epoch_started()
    pacer.epoch_accepted(2, 0)  # the empty epoch carried the checkpoint covering it
    assert pacer.wait_s(_ranges(), False, 2, True) == 0.2  # uploads: paced too
    clock.ms += 1000
    assert pacer.wait_s(_ranges(), False, 2, True) == 0
    clock.ms += 60_000
    assert pacer.wait_s(_ranges(), True, 2, False) == 0.2  # nothing new: idle for good


def test_jobs_acting_on_time_run_idle_epochs_every_second() -> None:
    clock = FixedClock(0)
    pacer = EpochPacer(_plan(NodeKind.SOURCE, NodeKind.WINDOW), _settings(1000), clock)
    assert pacer.idle_interval_ms == 1000
    pacer.epoch_started()
    pacer.epoch_accepted(1, 0)
    clock.ms += 999
    assert pacer.wait_s(_ranges(), False, 0, False) == 0.2
    clock.ms += 1
    assert pacer.wait_s(_ranges(), False, 0, False) == 0
    configured = EpochPacer(_plan(NodeKind.SOURCE), _settings(1000, idle_ms=250), clock)
    assert configured.idle_interval_ms == 250


def test_which_operators_act_on_time() -> None:
    assert not acts_on_time(_plan(NodeKind.SOURCE, NodeKind.MAP, NodeKind.REDUCE, NodeKind.SINK))
    for kind in (NodeKind.KEYED_PROCESS, NodeKind.WINDOW, NodeKind.ASYNC_WAIT, NodeKind.PROCESS):
        assert acts_on_time(_plan(NodeKind.SOURCE, kind))
    keyed_map = _plan(NodeKind.SOURCE, NodeKind.KEYED_PROCESS)
    keyed_map.nodes[1].element_call = lambda f, v, c: [v]
    assert not acts_on_time(keyed_map)
    ingestion = _plan(NodeKind.SOURCE)
    ingestion.nodes[0].watermark_strategy = object()
    assert acts_on_time(ingestion)


def test_epoch_interval_follows_the_checkpoint_interval_unless_set() -> None:
    def interval(**conf: str) -> tuple[int, int | None]:
        base = {"parallelism.default": "1", **conf}
        s = build_job_settings("j", JobRequest(base, None))
        return s.epoch_interval_ms, s.idle_epoch_interval_ms

    assert interval() == (1000, None)
    assert interval(**{"execution.checkpointing.interval": "3 s"}) == (3000, None)
    assert interval(
        **{
            "execution.checkpointing.interval": "3 s",
            "sparkpoint.epoch.interval": "0",
            "sparkpoint.epoch.idle-interval": "500 ms",
        }
    ) == (0, 500)


def test_a_request_wakes_the_waiting_driver() -> None:
    requests = RequestQueue()
    assert requests.wait(0.01) is False
    threading.Timer(0.1, lambda: requests.put("cancel")).start()
    t0 = time.monotonic()
    assert requests.wait(30) is True
    assert time.monotonic() - t0 < 5
    request = requests.take()
    assert request is not None and request.kind == "cancel"
    assert requests.take() is None


def test_long_running_sinks_not_waiting_for_checkpoints_pace_by_buffer_timeout() -> None:
    """Unset, the interval is the checkpoint interval while a sink publishes on checkpoints
    (or in the job mode, where an epoch costs a Spark job); in the long-running mode with
    only sinks that publish at each epoch's end it is Flink's buffer timeout."""
    from sparkpoint.connectors.sink import CollectSink, PrintSink
    from sparkpoint.runtime.driver.epoch_pacing import epoch_interval_ms

    def interval(sink: object, buffer_timeout: int | None = None, **conf: str) -> int:
        base = {"parallelism.default": "1", "execution.checkpointing.interval": "2 s", **conf}
        s = build_job_settings("j", JobRequest(base, None, buffer_timeout_ms=buffer_timeout))
        node = Node(0, NodeKind.SINK, "sink")
        node.sink = sink
        plan = Plan(stages=[], sources=[], sinks=[node], nodes=[node])
        return epoch_interval_ms(plan, s, s.epoch_mode != "job")

    lr = {"sparkpoint.epoch.mode": "long-running"}
    print_sink, collect_sink = PrintSink(), CollectSink()
    assert not print_sink.transactional and collect_sink.transactional
    job = {"sparkpoint.epoch.mode": "job"}
    assert interval(print_sink, **job) == 2000  # an epoch is a Spark job
    assert interval(print_sink) == 100  # auto: long-running while it can
    assert interval(collect_sink, **lr) == 2000  # published on checkpoints
    assert interval(print_sink, **lr) == 100  # Flink's default buffer timeout
    assert interval(print_sink, **lr, **{"execution.buffer-timeout": "30 ms"}) == 30
    assert interval(print_sink, 0, **lr) == 0  # set_buffer_timeout(0): records at once
    assert interval(print_sink, -1, **lr) == 2000  # -1: no timeout
    assert interval(print_sink, **lr, **{"sparkpoint.epoch.interval": "700 ms"}) == 700
    at_least_once = {"execution.checkpointing.mode": "AT_LEAST_ONCE"}
    assert interval(collect_sink, **lr, **at_least_once) == 100  # published every epoch


def _sized_pacer(clock: FixedClock, target_ms: int | None = None) -> EpochPacer:
    """A pacer with 1 s epochs, no split ever heavy, and ``target_ms`` (None: default)."""
    settings = _settings(1000)
    settings.max_records_per_split = 10_000_000
    settings.epoch_target_ms = target_ms
    return EpochPacer(_plan(NodeKind.SOURCE, NodeKind.REDUCE), settings, clock)


def _epoch(pacer: EpochPacer, clock: FixedClock, epoch: int, records: int, took: int) -> None:
    pacer.epoch_started()
    clock.ms += took
    pacer.epoch_accepted(epoch, records)


def test_epochs_whose_records_would_outlast_the_target_start_early() -> None:
    clock = FixedClock(10_000)
    pacer = _sized_pacer(clock)  # 250 ms target
    _epoch(pacer, clock, 1, 40_000, 810)  # near the maximum: 810 ms epochs
    # No fit yet: an epoch over twice the target probes at half its records.
    assert pacer.wait_s(_ranges(9_000, 9_000), False, 0, False) > 0
    assert pacer.wait_s(_ranges(10_000, 10_000), False, 0, False) == 0
    _epoch(pacer, clock, 2, 20_000, 410)  # the fit: 10 ms fixed, 0.02 ms per record
    # 250 ms hold 12,000 records; 100 ms after the planning 6,000 wait: due in 100 ms.
    pacer.epoch_started()
    clock.ms += 100
    assert pacer.wait_s(_ranges(3_000, 3_000), False, 0, False) == 0.1
    assert pacer.wait_s(_ranges(4_000, 4_000), False, 0, False) == 0.05
    assert pacer.wait_s(_ranges(6_000, 6_000), False, 0, False) == 0


def test_a_fixed_cost_above_the_target_keeps_epochs_paced() -> None:
    clock = FixedClock(10_000)
    pacer = _sized_pacer(clock)
    # A Spark job per epoch: ~330 ms whatever the records, above the 250 ms target.
    for epoch, (records, took) in enumerate([(1000, 340), (500, 330), (1000, 345)], 1):
        _epoch(pacer, clock, epoch, records, took)
    clock.ms += 100
    assert pacer.wait_s(_ranges(50_000), False, 0, False) == 0.2


def test_target_duration_defaults_to_a_quarter_of_the_interval_and_0_turns_it_off() -> None:
    settings = _settings(1000)
    assert epoch_target_ms(1000, settings) == 250
    assert epoch_target_ms(200, settings) == 200
    assert epoch_target_ms(10_000, settings) == 2500
    clock = FixedClock(10_000)
    pacer = _sized_pacer(clock, target_ms=0)
    _epoch(pacer, clock, 1, 40_000, 800)
    _epoch(pacer, clock, 2, 20_000, 410)
    assert pacer.wait_s(_ranges(30_000), False, 0, False) == 0.2
    config = {"parallelism.default": "1", "sparkpoint.epoch.target-duration": "100 ms"}
    assert build_job_settings("t", JobRequest(config, None)).epoch_target_ms == 100


def test_sparse_epochs_keep_a_fixed_schedule() -> None:
    """As the coordinator's periodic checkpoints do: waking late does not push the epochs
    (and the checkpoints they carry) later and later."""
    clock = FixedClock(10_000)
    pacer = EpochPacer(_plan(NodeKind.SOURCE, NodeKind.REDUCE), _settings(1000), clock)
    pacer.epoch_started()  # 10,000: the next at 11,000
    clock.ms = 11_004  # the driver woke 4 ms late
    assert pacer.wait_s(_ranges(5), False, 0, False) == 0
    pacer.epoch_started()
    clock.ms = 11_997
    assert pacer.wait_s(_ranges(5), False, 0, False) == 0.003  # due at 12,000, not 12,004
    clock.ms = 12_000
    pacer.epoch_started()
    clock.ms = 12_500
    pacer.epoch_started()  # heavy input started one early: the schedule starts anew
    clock.ms = 13_400
    assert pacer.wait_s(_ranges(5), False, 0, False) == 0.1


def test_the_auto_mode_is_paced_as_the_mode_its_epochs_run_in() -> None:
    """Sparse input to a sink that publishes every epoch: every buffer timeout while the
    epochs run in long-running tasks, every epoch interval while they are Spark jobs."""
    from sparkpoint.connectors.sink import PrintSink

    clock = FixedClock(10_000)
    settings = _settings(1000)
    settings.epoch_mode = "auto"
    plan = _plan(NodeKind.SOURCE, NodeKind.REDUCE, NodeKind.SINK)
    plan.nodes[2].sink = PrintSink()
    plan.sinks.append(plan.nodes[2])
    pacer = EpochPacer(plan, settings, clock)
    pacer.epoch_started()
    clock.ms += 60
    assert pacer.wait_s(_ranges(5), False, 0, False) == 0.04  # 100 ms: the buffer timeout
    pacer.runs_long_running(False)  # another Spark job appeared: epochs are Spark jobs
    _epoch(pacer, clock, 1, 1000, 340)
    _epoch(pacer, clock, 2, 500, 330)
    assert pacer.wait_s(_ranges(5), False, 0, False) == 0.2  # paced by the 1 s interval
    clock.ms += 700
    assert pacer.wait_s(_ranges(5), False, 0, False) == 0
    pacer.runs_long_running(True)
    pacer.epoch_started()
    clock.ms += 100
    assert pacer.wait_s(_ranges(5), False, 0, False) == 0
