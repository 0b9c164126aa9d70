"""Kafka → key_by/reduce → Kafka EXACTLY_ONCE against a broker as production clusters run it
(``tests.fixtures.kafka_secured``: SASL_SSL with SCRAM-SHA-512 only, TLS certificates made by
the test, ``StandardAuthorizer`` with ACLs for the job's principal only), configured with the
Java property names a PyFlink program sets (``sasl.jaas.config``, a JKS and a PKCS12
truststore). A Python worker is killed mid-run and the driver is killed and restarted from
the latest checkpoint: the output is exact under ``read_committed`` and no transaction is
left open, both checked as the admin with clients independent of the code under test
(librdkafka's consumer, Kafka's own ``kafka-transactions.sh``). The same job with the
transactional-id ACL removed fails at once, naming it."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from sparkpoint.errors import JobExecutionError
from sparkpoint.testing import FailureInjector
from tests.connectors.kafka.kafka_driver import sum_job_env
from tests.connectors.kafka.kafka_jobs import (
    KEYS,
    checkpoint_positions,
    expected_output,
    job_env,
    kafka_sum_job,
    latest_checkpoint,
)
from tests.fixtures.kafka_secured import JOB, SecuredKafkaBroker

pytestmark = pytest.mark.spark  # a broker JVM, Spark, and a driver subprocess

N = 4000  # 1000 records per partition
PARTITIONS = 4
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafka_driver.py")
# Record 241 is offset 60 of partition 1: read in the second epoch of 50 records per split.
KILL_RECORD = 241


def _acls(name: str) -> list[tuple[str, str, str, str]]:
    """What the job's principal needs, as docs/kafka-source.md and docs/kafka-sink.md say."""
    source, sink = f"{name}-in", f"{name}-out"
    return [
        ("TOPIC", source, "LITERAL", "READ"),
        ("TOPIC", source, "LITERAL", "DESCRIBE"),
        ("GROUP", f"{name}-group", "LITERAL", "READ"),
        ("TOPIC", sink, "LITERAL", "WRITE"),
        ("TOPIC", sink, "LITERAL", "DESCRIBE"),
        ("TOPIC", sink, "LITERAL", "READ"),  # DescribeProducers: the sweep's hanging check
        ("TRANSACTIONAL_ID", name, "PREFIXED", "WRITE"),
        ("TRANSACTIONAL_ID", name, "PREFIXED", "DESCRIBE"),
    ]


def _topics(broker: SecuredKafkaBroker, name: str) -> tuple[str, str]:
    """The input (``N`` records ``"<x % KEYS>,<x>"`` in partition ``x % 4``, written as the
    admin) and output topics."""
    from confluent_kafka import Producer

    source, sink = f"{name}-in", f"{name}-out"
    broker.create_topic(source, PARTITIONS)
    broker.create_topic(sink, 2)
    producer = Producer({**broker.client_config(), "enable.idempotence": True})
    for x in range(N):
        producer.produce(source, f"{x % KEYS},{x}".encode(), partition=x % PARTITIONS)
    assert producer.flush(60) == 0
    return source, sink


def _read_committed(broker: SecuredKafkaBroker, topic: str) -> collections.Counter[str]:
    """Every record of ``topic`` a ``read_committed`` consumer (the admin's) reads."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            **broker.client_config(),
            "group.id": "checker",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    parts = [TopicPartition(topic, p) for p in range(2)]
    ends = {
        tp.partition: consumer.get_watermark_offsets(tp, timeout=30, cached=False)[1]
        for tp in parts
    }
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    got: collections.Counter[str] = collections.Counter()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got.update(m.value().decode() for m in consumer.consume(10_000, 0.5) if not m.error())
        if all(tp.offset >= ends[tp.partition] for tp in consumer.position(parts)):
            break
    consumer.close()
    return got


def _ongoing(broker: SecuredKafkaBroker, prefix: str) -> list[str]:
    """The job's ongoing transactions as Kafka's own ``kafka-transactions.sh list`` shows
    them (columns: TransactionalId, Coordinator, ProducerId, TransactionState)."""
    rows = [line.split() for line in broker.kafka_transactions("list").splitlines()[1:]]
    busy = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
    return [r[0] for r in rows if r and r[0].startswith(prefix + "-") and r[-1] in busy]


def _completed(ckpt: str) -> int:
    try:
        return int(latest_checkpoint(ckpt).rsplit("-", 1)[1])
    except (ValueError, FileNotFoundError):
        return 0


def test_exactly_once_on_a_secured_cluster_through_a_worker_and_a_driver_kill(
    spark: Any, tmp_path: Any, secured_kafka_broker: SecuredKafkaBroker
) -> None:
    broker = secured_kafka_broker
    name = "secured"
    source, sink = _topics(broker, name)
    broker.grant(_acls(name))
    job = {
        "bootstrap": broker.bootstrap_servers,
        "source": source,
        "sink": sink,
        "prefix": name,
        "dir": str(tmp_path),
        "master": "local[2,4]",
        "per_split": 50,
        "restore": None,
        "kill_epoch": None,
        "kill_record": KILL_RECORD,
        "properties": broker.java_properties(JOB, store="jks"),
    }
    ckpt = str(tmp_path / "ckpt")
    env_vars = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    with open(tmp_path / "run1.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, SCRIPT, json.dumps(job)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env_vars,
        )
        deadline = time.monotonic() + 300
        while _completed(ckpt) < 4:
            assert proc.poll() is None, (tmp_path / "run1.log").read_text()[-4000:]
            assert time.monotonic() < deadline, "no four checkpoints in time"
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    # The worker parsing record 241 was SIGKILLed (Spark ran its task again) before the
    # driver was.
    assert FailureInjector(str(tmp_path / "inj"), KILL_RECORD, mode="kill").fired() == 1
    latest = latest_checkpoint(ckpt)
    positions = checkpoint_positions(ckpt, int(latest.rsplit("-", 1)[1]))
    assert all(p % 50 == 0 for p in positions) and sum(positions) < N
    # A new driver, with a PKCS12 truststore this time, resumes from the latest checkpoint.
    resumed = {
        **job,
        "restore": latest,
        "per_split": 250,
        "properties": broker.java_properties(JOB, store="p12"),
    }
    env = sum_job_env(spark, resumed)
    kafka_sum_job(
        env, broker.bootstrap_servers, source, sink, name, properties=resumed["properties"]
    )
    t0 = time.monotonic()
    env.execute(name)
    resumed_s = time.monotonic() - t0
    got = _read_committed(broker, sink)
    expected = expected_output(N)
    assert (sum((expected - got).values()), sum((got - expected).values())) == (0, 0)
    assert got == expected
    assert _ongoing(broker, name) == [], broker.kafka_transactions("list")
    print(f"resumed job on SASL_SSL: {resumed_s:.1f} s")


def test_a_missing_acl_fails_the_job_at_once_naming_it(
    spark: Any, tmp_path: Any, secured_kafka_broker: SecuredKafkaBroker
) -> None:
    broker = secured_kafka_broker
    name = "noacl"  # not a prefix of the other test's ids, nor theirs of it
    source, sink = _topics(broker, name)
    acls = _acls(name)
    broker.grant(acls)
    missing = ("TRANSACTIONAL_ID", name, "PREFIXED", "WRITE")
    broker.revoke([missing])
    env = job_env(spark, tmp_path, per_split=250)
    kafka_sum_job(
        env, broker.bootstrap_servers, source, sink, name, properties=broker.java_properties()
    )
    t0 = time.monotonic()
    with pytest.raises(JobExecutionError) as e:
        env.execute(name)
    took = time.monotonic() - t0
    assert "Write on TransactionalId" in str(e.value), str(e.value)[-2000:]
    assert "job-secret" not in str(e.value)
    assert took < 120, f"{took:.0f} s before failing"
    print(f"failed after {took:.1f} s: {e.value}")
