"""Unbounded Kafka jobs against the real broker: an idle job runs no Spark job and still
delivers a record produced later within about one interval; a slow operator bounds the
records per epoch while the consumer lag per partition counts down exactly (job client,
dashboard JSON and page); cancel ends an idle job in seconds; stop-with-savepoint under a
steady producer and its restore give every record exactly once; ``set_unbounded`` stopping
offsets end a job by itself."""

from __future__ import annotations

import collections
import json
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from sparkpoint.cli.history import checkpoint_history, format_history
from sparkpoint.common import Configuration, SimpleStringSchema, WatermarkStrategy
from sparkpoint.datastream import FileSystemCheckpointStorage, StreamExecutionEnvironment
from sparkpoint.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from tests.connectors.kafka.kafka_jobs import KEYS, expected_output, read_committed
from tests.fixtures.kafka import KafkaBroker, ordered_producer

PARTITIONS = 2


def _env(spark: Any, tmp_path: Any, conf: dict[str, str], restore: str | None = None) -> Any:
    c = Configuration()
    c.set_string("sparkpoint.local-state.dir", str(tmp_path / "local"))
    for key, value in conf.items():
        c.set_string(key, value)
    if restore is not None:
        c.set_string("execution.savepoint.path", restore)
    env = StreamExecutionEnvironment.get_execution_environment(c, spark=spark)
    env.set_parallelism(2)
    env.enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage(str(tmp_path / "ckpt"), savepoint_path=str(tmp_path / "sp"))
    )
    return env


class SlowParse:
    """``"k,x"`` → ``(k, x)``, taking ``seconds`` per record (a slow operator)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, line: str) -> tuple[int, int]:
        if self.seconds:
            time.sleep(self.seconds)
        k, x = line.split(",")
        return int(k), int(x)


def _job(
    env: Any, broker: KafkaBroker, name: str, stop_at_latest: bool = False, slow: float = 0.0
) -> None:
    """Unbounded Kafka → parse → key_by → running sum → Kafka EXACTLY_ONCE."""
    builder = (
        KafkaSource.builder()
        .set_bootstrap_servers(broker.bootstrap_servers)
        .set_topics(f"{name}-in")
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(SimpleStringSchema())
    )
    if stop_at_latest:
        builder.set_unbounded(KafkaOffsetsInitializer.latest())
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(broker.bootstrap_servers)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(f"{name}-out")
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix(name)
        .build()
    )
    (
        env.from_source(builder.build(), WatermarkStrategy.no_watermarks(), "kafka")
        .uid("source")
        .map(SlowParse(slow))
        .key_by(lambda kv: kv[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("sum")
        .map(lambda kv: f"{kv[0]},{kv[1]}")
        .sink_to(sink)
        .uid("sink")
    )


def _topics(broker: KafkaBroker, name: str) -> None:
    broker.create_topic(f"{name}-in", PARTITIONS)
    broker.create_topic(f"{name}-out", 2)


def _produce(broker: KafkaBroker, name: str, xs: range) -> None:
    """Record ``x`` is ``"<x % KEYS>,<x>"`` in partition ``x % PARTITIONS`` (each key in one
    partition, so the running sums are deterministic)."""
    producer = ordered_producer(broker.bootstrap_servers)
    for x in xs:
        producer.produce(f"{name}-in", f"{x % KEYS},{x}".encode(), partition=x % PARTITIONS)
    assert producer.flush(30) == 0


def _wait(what: str, ok: Callable[[], bool], client: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert not client.get_job_execution_result().done(), f"job ended before {what}"
        assert time.monotonic() < deadline, f"no {what} in {timeout} s"
        time.sleep(0.05)


def _spark_jobs(spark: Any, job_id: str) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(f"sparkpoint-{job_id}"))


def _committed(broker: KafkaBroker, name: str) -> int:
    """Records of the job's output a ``read_committed`` consumer sees now (a completed
    checkpoint's transactions are committed after it completes, as Flink's)."""
    return len(read_committed(broker.bootstrap_servers, f"{name}-out", 2))


def _quiescent(client: Any) -> bool:
    """Every epoch that read records is covered by a completed checkpoint, none pending."""
    reports = client.get_epoch_reports()
    stats = client.get_checkpoint_statistics()
    last_data = max((r.epoch for r in reports if r.records_in), default=0)
    done = [s.epoch for s in stats if s.status == "COMPLETED"]
    pending = [s for s in stats if s.status == "IN_PROGRESS"]
    return not pending and (last_data == 0 or (bool(done) and max(done) >= last_data))


def test_idle_job_runs_no_spark_job_and_delivers_a_late_record(
    spark: Any, tmp_path: Any, kafka_broker: KafkaBroker
) -> None:
    name = "unb-idle"
    _topics(kafka_broker, name)
    _produce(kafka_broker, name, range(40))
    env = _env(spark, tmp_path, {})
    _job(env, kafka_broker, name)
    client = env.execute_async(name)
    try:
        job_id = client.get_job_id()
        _wait("40 records", lambda: client.job_master.progress.records_in == 40, client)
        _wait("the checkpoint covering them", lambda: _quiescent(client), client)
        _wait("their output", lambda: _committed(kafka_broker, name) == 40, client)
        # The epoch whose report completed that checkpoint may still be ending: its report
        # is appended after the checkpoint completes.
        time.sleep(1.5)
        epochs, jobs = len(client.get_epoch_reports()), _spark_jobs(spark, job_id)
        time.sleep(4.0)  # a loop planning every 0.2 s would have run 20 epochs
        assert len(client.get_epoch_reports()) == epochs
        assert _spark_jobs(spark, job_id) == jobs
        got = collections.Counter(read_committed(kafka_broker.bootstrap_servers, f"{name}-out"))
        assert got == expected_output(40)
        t0 = time.monotonic()
        _produce(kafka_broker, name, range(40, 41))
        _wait(
            "the late record",
            lambda: len(read_committed(kafka_broker.bootstrap_servers, f"{name}-out", 2)) == 41,
            client,
            timeout=30,
        )
        latency = time.monotonic() - t0
        print(f"idle job: late record committed after {latency:.2f} s (interval 1 s)")
        assert latency < 4.0
        got = collections.Counter(read_committed(kafka_broker.bootstrap_servers, f"{name}-out"))
        assert got == expected_output(41)
        cancel_at = time.monotonic()
        client.cancel().result(timeout=30)
        client.wait(timeout=30)
        assert time.monotonic() - cancel_at < 5.0
        assert client.job_master.status == "CANCELED"
    finally:
        if not client.get_job_execution_result().done():
            client.cancel()
            client.wait(timeout=60)


def test_slow_operator_bounds_each_epoch_and_lag_counts_down(
    spark: Any, tmp_path: Any, kafka_broker: KafkaBroker
) -> None:
    name = "unb-slow"
    _topics(kafka_broker, name)
    _produce(kafka_broker, name, range(400))  # 200 per partition
    conf = {"sparkpoint.epoch.max-records-per-split": "50", "sparkpoint.dashboard.enabled": "true"}
    env = _env(spark, tmp_path, conf)
    _job(env, kafka_broker, name, slow=0.003)
    client = env.execute_async(name)
    seen: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []  # the pendingRecords metrics, as the job client reads them
    try:
        url = client.get_dashboard_url()
        while client.job_master.progress.records_in < 400:
            with urllib.request.urlopen(f"{url}api/job", timeout=10) as r:
                seen.append(json.load(r)["consumer_lag"])
            metrics = client.get_metrics()
            pending.append({k: v for k, v in metrics.items() if k.endswith(".pendingRecords")})
            assert not client.get_job_execution_result().done()
            time.sleep(0.1)
        with urllib.request.urlopen(url, timeout=10) as r:
            page = r.read().decode()
        # The sink commits the last epochs' output after the checkpoint covering them.
        _wait("their output", lambda: _committed(kafka_broker, name) == 400, client)
    finally:
        client.cancel()
        client.wait(timeout=60)
    reports = [r for r in client.get_epoch_reports() if r.records_in]
    # Reading kept pace with the slow operator: 100 records (50 per split) per epoch.
    assert [r.records_in for r in reports] == [100] * 4
    lags = [dict(r.consumer_lag["source"]) for r in reports]
    assert lags == [{f"{name}-in-0": n, f"{name}-in-1": n} for n in (150, 100, 50, 0)]
    assert all(s in [{}, *({"source": lag} for lag in lags)] for s in seen)
    assert any(seen)  # the dashboard showed a lag while the job read
    # Flink's pendingRecords: the sum under the source's subtask 0, and each partition's.
    totals = [(k, v) for p in pending for k, v in p.items() if k.endswith(".0.pendingRecords")]
    assert len({k for k, _v in totals}) == 1 and {v for _k, v in totals} <= {300, 200, 100, 0}
    for sample in pending:
        splits = {k.split(".split.")[1]: v for k, v in sample.items() if ".split." in k}
        assert sample == {} or {tuple(splits.values())} <= {(n, n) for n in (150, 100, 50, 0)}
        assert sample == {} or sum(splits.values()) in sample.values()
    assert any(sum(p.values()) for p in pending)  # a lag was seen through the metrics too
    assert 'id="consumer-lag"' in page and f"{name}-in-1" in page
    got = collections.Counter(read_committed(kafka_broker.bootstrap_servers, f"{name}-out"))
    assert got == expected_output(400)


def test_stop_with_savepoint_under_steady_input_and_restore_exactly(
    spark: Any, tmp_path: Any, kafka_broker: KafkaBroker
) -> None:
    name = "unb-stop"
    _topics(kafka_broker, name)
    stop = threading.Event()
    produced = [0]

    def produce_steadily() -> None:  # 200 records per second until told to stop
        while not stop.is_set():
            _produce(kafka_broker, name, range(produced[0], produced[0] + 20))
            produced[0] += 20
            time.sleep(0.1)

    producer = threading.Thread(target=produce_steadily)
    producer.start()
    try:
        env = _env(spark, tmp_path, {})
        _job(env, kafka_broker, name)
        client = env.execute_async(name)
        _wait("three epochs", lambda: len(client.get_epoch_reports()) >= 3, client)
        t0 = time.monotonic()
        savepoint = client.stop_with_savepoint(False).result(timeout=60)
        client.wait(timeout=60)
        stop_seconds = time.monotonic() - t0
    finally:
        stop.set()
        producer.join()
    print(f"stop-with-savepoint of an unbounded Kafka job: {stop_seconds:.2f} s")
    assert stop_seconds < 10.0
    assert client.job_master.status == "FINISHED"
    first = client.job_master.progress.records_in
    assert 0 < first <= produced[0]
    rows, _skipped = checkpoint_history(str(tmp_path / "sp"))
    assert [sorted(r["consumer_lag"]["source"]) for r in rows] == [[f"{name}-in-0", f"{name}-in-1"]]
    assert " LAG " in format_history(rows, 0).splitlines()[0]

    # The restore reads on from the savepoint's offsets: every record once across the stop.
    env = _env(spark, tmp_path, {}, restore=str(savepoint))
    _job(env, kafka_broker, name)
    client = env.execute_async(f"{name}-resumed")
    try:
        _wait(
            "the rest of the input",
            lambda: client.job_master.progress.records_in == produced[0] - first,
            client,
        )
        _wait("its output", lambda: _committed(kafka_broker, name) == produced[0], client)
    finally:
        client.cancel()
        client.wait(timeout=60)
    assert client.job_master.progress.records_in == produced[0] - first
    got = collections.Counter(read_committed(kafka_broker.bootstrap_servers, f"{name}-out"))
    assert got == expected_output(produced[0])


def test_set_unbounded_ends_the_job_at_its_stopping_offsets(
    spark: Any, tmp_path: Any, kafka_broker: KafkaBroker
) -> None:
    """``set_unbounded(latest())``: the offsets of the start; records produced later are
    not read, and the job finishes by itself, as Flink's ``KafkaSource``."""
    name = "unb-offsets"
    _topics(kafka_broker, name)
    _produce(kafka_broker, name, range(30))
    env = _env(spark, tmp_path, {})
    _job(env, kafka_broker, name, stop_at_latest=True)
    client = env.execute_async(name)
    deadline = time.monotonic() + 60
    # The stopping offsets are resolved when the splits are first discovered, on the job's
    # thread: produce the later records only once an epoch has run.
    while client.job_master.progress.epochs_run < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    _produce(kafka_broker, name, range(30, 40))
    result = client.wait(timeout=120)
    assert client.job_master.status == "FINISHED"
    assert result.records_in == 30
    got = collections.Counter(read_committed(kafka_broker.bootstrap_servers, f"{name}-out"))
    assert got == expected_output(30)
