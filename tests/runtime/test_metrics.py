"""Issue 31's PyFlink program on a real Spark job: user metrics of every kind and Flink's
system metrics, exact per operator after a Python worker was killed mid-epoch (Spark's
retry of the task: the killed attempt's values never count)."""

from __future__ import annotations

from typing import Any

import pytest

from sparkpoint.datastream import CheckpointingMode, FileSystemCheckpointStorage
from sparkpoint.metrics.catalog import SYSTEM_METRICS
from sparkpoint.metrics.record_times import wall_clock_ms
from sparkpoint.testing import FailureInjector
from tests.runtime.jobs.metric_jobs import BUCKETS, metrics_job
from tests.runtime.jobs.reference import read_sink

N = 3000

pytestmark = pytest.mark.spark


def _by_operator(values: list[Any], operator: str, name: str) -> dict[int, Any]:
    return {
        v.subtask: v.value for v in values if v.operator_name == operator and v.key.name == name
    }


def test_user_and_system_metrics_are_exact_after_a_worker_kill(env: Any, tmp_path: Any) -> None:
    injector = FailureInjector(str(tmp_path / "inj"), at_record=1234, times=1, mode="kill")
    env.enable_checkpointing(10, CheckpointingMode.EXACTLY_ONCE)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage((tmp_path / "ckpt").as_uri())
    )
    env.configure({"sparkpoint.epoch.max-records-per-split": "500"})
    metrics_job(env, str(tmp_path / "out"), N, injector)
    started_ms = wall_clock_ms()
    client = env.execute_async("metrics")
    client.wait(timeout=300)
    ran_ms = wall_clock_ms() - started_ms
    assert injector.fired() == 1
    assert len(read_sink(str(tmp_path / "out"))) == N
    values = client.get_metric_values()

    records = _by_operator(values, "parse", "records")
    assert sum(records.values()) == N  # the user counter: every record the map saw, once
    # get_count() inside the function is the subtask's total (it starts from the driver's)
    assert _by_operator(values, "parse", "seen") == records
    events = _by_operator(values, "parse", "events")
    assert sum(e["count"] for e in events.values()) == N
    sizes = list(_by_operator(values, "parse", "sizes").values())
    assert sum(d["count"] for d in sizes) == N
    assert sum(d["sum"] for d in sizes) == sum(x % BUCKETS for x in range(N))
    assert min(d["min"] for d in sizes) == 0 and max(d["max"] for d in sizes) == BUCKETS - 1
    last = [v for v in values if v.key.name == "last"]
    assert last and all(v.key.groups == (("parser", None), ("stream", "numbers")) for v in last)
    # Functions are opened anew for every run of an epoch: the gauge shows the latest run's.
    assert all(-1 <= v.value < N for v in last)

    for operator, ins, outs in (
        ("numbers", N, N),
        ("parse", N, N),
        ("sum", N, N),  # STREAMING: every update of the rolling sum goes out
        ("sink", N, 0),
    ):
        assert sum(_by_operator(values, operator, "numRecordsIn").values()) == ins, operator
        assert sum(_by_operator(values, operator, "numRecordsOut").values()) == outs, operator
    assert sum(_by_operator(values, "sum", "numLateRecordsDropped").values()) == 0
    assert set(_by_operator(values, "sum", "numRecordsIn")) == {0, 1}

    completed = [s for s in client.get_checkpoint_statistics() if s.status == "COMPLETED"]
    metrics = client.get_metrics()
    assert completed and metrics["metrics.numberOfCompletedCheckpoints"] == len(completed)
    assert metrics["metrics.lastCheckpointFullSize"] == completed[-1].state_size
    assert metrics["metrics.numRestarts"] == 0
    assert metrics["metrics.uptime"] == -1  # the job ended, as Flink's gauge says then
    # The file sink's last commit published the last epoch's part files.
    assert 0 <= metrics["metrics.sparkpoint.lastCommitLatency"] < 60_000
    # The number sequence's records carry no timestamp: they count from when their source
    # task read them (the executor's clock, this host's) to the file sink's commit (the
    # driver's); both within the job's run.
    newest, mean, oldest = (
        metrics[f"metrics.sparkpoint.lastCommitRecordLatency{m}"] for m in ("Min", "Mean", "Max")
    )
    assert 0 <= newest <= mean <= oldest <= ran_ms
    emit_lags = _by_operator(values, "numbers", "currentEmitEventTimeLag")
    assert emit_lags and set(emit_lags.values()) == {-1}  # no timestamps: Flink's UNDEFINED
    assert metrics["metrics.parse.0.parser.records"] == records[0]
    assert (
        metrics["metrics.parse.1.parser.stream.numbers.last"]
        == _by_operator(values, "parse", "last")[1]
    )
    reported = {".".join((*(n for n, _ in v.key.groups), v.key.name)) for v in values}
    # pendingRecords comes only from sources that know their end (Kafka: test_unbounded),
    # numRecordsSkipped only from a Kafka source that skipped deleted records (test_retention).
    only_kafka = {"pendingRecords", "sparkpoint.numRecordsSkipped"}
    assert {m.name for m in SYSTEM_METRICS if m.name not in only_kafka} <= reported
    sizes_of_sum = _by_operator(values, "sum", "stateSize")
    assert set(sizes_of_sum) == {0, 1} and all(size > 0 for size in sizes_of_sum.values())


def test_distribution_values_are_folded_after_every_batch(env: Any) -> None:
    # One epoch reads the whole split: a distribution that kept its values until the task
    # reported would hold all of them; folded after every batch it holds one batch at most.
    from sparkpoint.connectors.number_seq import NumberSequenceSource
    from sparkpoint.connectors.sink import CollectSink
    from sparkpoint.runtime.task.router import GROUP_TARGET
    from tests.runtime.jobs.metric_jobs import PeakPending

    n = 3 * GROUP_TARGET + 5
    env.set_parallelism(1)
    env.configure({"sparkpoint.epoch.max-records-per-split": str(2 * n)})
    sink = CollectSink()
    (
        env.from_source(NumberSequenceSource(0, n - 1), None, "numbers")
        .map(PeakPending())
        .name("peak")
        .sink_to(sink)
    )
    client = env.execute_async("peak")
    result = client.wait(timeout=300)
    assert len(sink.collected) == n
    assert [e.records_in for e in result.epoch_reports if e.records_in] == [n]  # one run
    values = client.get_metric_values()
    (sizes,) = _by_operator(values, "peak", "sizes").values()
    mean = (n - 1) / 2
    assert sizes == {"count": n, "sum": n * (n - 1) // 2, "min": 0, "max": n - 1, "mean": mean}
    assert _by_operator(values, "peak", "peak") == {0: GROUP_TARGET}
