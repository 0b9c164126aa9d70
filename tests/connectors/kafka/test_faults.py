"""Kafka → key_by/reduce → Kafka under injected faults against the real broker: a Python
worker killed in the source's stage and in the sink's (retried by Spark, or restored from a
checkpoint once Spark's attempts are spent), the broker killed and restarted mid-job, and
AT_LEAST_ONCE under a restore. EXACTLY_ONCE: a ``read_committed`` consumer reads every
expected record exactly once, the restored checkpoint holds the offsets of the epochs it
covers, and no transaction of the job is left open (the driver aborted what the killed
attempts left: counted)."""

from __future__ import annotations

import collections
import time
from typing import Any

import pytest

from sparkpoint.common import RestartStrategies
from sparkpoint.datastream.connectors.kafka import DeliveryGuarantee, TransactionNamingStrategy
from sparkpoint.testing import FailureInjector
from tests.connectors.kafka.kafka_jobs import (
    KEYS,
    check_exact,
    check_restored_offsets,
    create_topics,
    expected_output,
    job_env,
    kafka_sum_job,
    open_transactions,
    read_committed,
    record_restored_positions,
    running_sum_at,
)
from tests.epoch_mode import long_running
from tests.fixtures import kafka_tools
from tests.fixtures.kafka import KafkaBroker

N = 4000  # 1000 records per partition
PER_SPLIT = 250  # record 2401 (offset 600 of partition 1) is read in the third epoch


_POOLING = TransactionNamingStrategy.POOLING
_INCREMENTING = TransactionNamingStrategy.INCREMENTING


def _uncommitted_writers(broker: KafkaBroker, prefix: str, sink: str) -> list[str]:
    """The job's transactional ids whose producer wrote to ``sink`` (its partitions keep
    the producer's state) and whose last transaction was not committed, by Kafka's own
    tools: with INCREMENTING (an id per transaction), the transactions that were aborted."""
    wrote = {
        p.producer_id
        for partition in range(2)
        for p in kafka_tools.describe_producers(broker.bootstrap_servers, sink, partition)
    }
    return sorted(
        t.transactional_id
        for t in kafka_tools.list_transactions(broker.bootstrap_servers)
        if t.transactional_id.startswith(prefix + "-")
        and t.producer_id in wrote
        and t.state != "CompleteCommit"
    )


@pytest.mark.parametrize(
    ("stage", "times", "naming", "lingering"),
    [
        # The sink task is killed formatting its first batch of epoch 3, before it began a
        # transaction (a writer begins one with its first records): nothing to abort.
        ("sink", 1, _INCREMENTING, False),
        # The other subtask's sink task had finished epoch 3 when Spark gave up on the job:
        # its transaction, in no checkpoint, was left open, and the restore's sweep aborted it.
        ("sink", 4, _INCREMENTING, True),
        ("sink", 4, _POOLING, True),
        # A source-stage task of epoch 3 fails before its shuffle is written: no sink task
        # of epoch 3 ran, so no transaction of it exists to linger.
        ("source", 4, _INCREMENTING, False),
    ],
    ids=["sink-spark-retry", "sink-job-restore", "sink-job-restore-pooling", "source-job-restore"],
)
def test_python_worker_killed(
    spark: Any,
    tmp_path: Any,
    kafka_broker: KafkaBroker,
    stage: str,
    times: int,
    naming: TransactionNamingStrategy,
    lingering: bool,
) -> None:
    """The worker parsing record 2401 (source stage) or formatting its running sum for the
    sink (sink stage) is SIGKILLed ``times`` times: once, Spark's retry runs the task again;
    four times, Spark gives up and the job restores from the second epoch's checkpoint (with
    either transaction naming: POOLING's restored commits meet reused ids)."""
    name = f"fault-kill-{stage}-{times}" + ("-pooling" if naming is _POOLING else "")
    source, sink = create_topics(kafka_broker, name, N)
    at = running_sum_at(2401) if stage == "sink" else 2401
    inj = FailureInjector(str(tmp_path / "inj"), at, times=times, mode="kill")
    env = job_env(spark, tmp_path, per_split=PER_SPLIT)
    positions = record_restored_positions(env, tmp_path)
    injectors = {"sink_injector": inj} if stage == "sink" else {"injector": inj}
    kafka_sink = kafka_sum_job(
        env, kafka_broker.bootstrap_servers, source, sink, name, naming=naming, **injectors
    )
    result = env.execute(name)
    assert inj.fired() == times
    if times == 4:
        assert result.restarts == 1
        check_restored_offsets(result, positions)
    else:
        assert result.restarts == 0
    check_exact(kafka_broker, sink, name, N)
    aborted = kafka_sink.lingering_aborted
    # Only the job's own transactions were aborted, and whether any were is the case's.
    assert [t for t in aborted if not t.startswith(name + "-")] == []
    if not (long_running() and stage == "sink"):
        # In the long-running mode a killed task discards its run's other tasks' work too:
        # the other sink subtask's transaction of the epoch lingers if it had begun one.
        assert bool(aborted) is lingering, f"lingering transactions aborted: {aborted}"
    if naming is _INCREMENTING:
        # By Kafka's own tools: the ids that wrote and were not committed are exactly those
        # the sweep aborted (a POOLING id is reused after its abort, and then committed).
        assert _uncommitted_writers(kafka_broker, name, sink) == sorted(aborted)


def test_broker_killed_and_restarted_mid_job(
    spark: Any, tmp_path: Any, kafka_broker: KafkaBroker
) -> None:
    """The broker is SIGKILLed after the third epoch and started again on its log dir: the
    job waits for it or fails over (restarts spaced a second apart) and finishes exact. When
    the kill lands between a commit's ``PrepareCommit`` and its markers (1 run in ~20), the
    restarted broker leaves that transaction hanging, and the sweep ends it
    (``kafka_hanging``; deterministic in ``test_hanging.py``)."""
    name = "fault-broker"
    source, sink = create_topics(kafka_broker, name, N)
    env = job_env(
        spark, tmp_path, per_split=100, restarts=RestartStrategies.fixed_delay_restart(20, 1000)
    )
    kafka_sum_job(env, kafka_broker.bootstrap_servers, source, sink, name)
    client = env.execute_async(name)
    master = client.job_master
    while master.progress.epochs_run < 3:
        assert not client.get_job_execution_result().done(), "job ended before the fault"
        time.sleep(0.05)
    try:
        kafka_broker.kill()
        killed_at = master.progress.epochs_run
        assert not client.get_job_execution_result().done(), "job ended before the fault"
        time.sleep(2)
    finally:
        kafka_broker.start()  # the session's later tests need the broker
    assert not client.get_job_execution_result().done(), "job ended while the broker was down"
    client.wait(timeout=300)
    assert master.status == "FINISHED"
    assert master.progress.epochs_run > killed_at + 1  # the job ran on after the broker came back
    check_exact(kafka_broker, sink, name, N)


def test_at_least_once_under_a_restore(
    spark: Any, tmp_path: Any, kafka_broker: KafkaBroker
) -> None:
    """AT_LEAST_ONCE, the sink's worker killed four times in the third epoch: every line is
    there, those of records before the restored checkpoint's offsets exactly once (flushed
    when their epoch ended), only lines of the replayed epoch more than once."""
    name = "fault-alo"
    source, sink = create_topics(kafka_broker, name, N)
    inj = FailureInjector(str(tmp_path / "inj"), running_sum_at(2401), times=4, mode="kill")
    env = job_env(spark, tmp_path, per_split=PER_SPLIT)
    positions = record_restored_positions(env, tmp_path)
    kafka_sum_job(
        env,
        kafka_broker.bootstrap_servers,
        source,
        sink,
        name,
        sink_injector=inj,
        guarantee=DeliveryGuarantee.AT_LEAST_ONCE,
    )
    result = env.execute(name)
    assert inj.fired() == 4 and result.restarts == 1
    check_restored_offsets(result, positions)
    got = collections.Counter(read_committed(kafka_broker.bootstrap_servers, sink))
    expected = expected_output(N)
    assert set(got) == set(expected)
    (failover,) = result.failovers
    restored = positions.at_epoch[failover.epoch + 1][1][0]  # the same on every partition
    # Record x is offset x // 4 of partition x % 4.
    before = {_line(x) for x in range(N) if x // 4 < restored}
    assert len(before) == 4 * restored > 0
    assert all(got[line] == 1 for line in before)
    replayed = {_line(x) for x in range(N) if restored <= x // 4 < 750}
    assert {line for line, n in got.items() if n > 1} <= replayed
    assert open_transactions(kafka_broker, name, {sink: 2}) == []


def _line(x: int) -> str:
    return f"{x % KEYS},{running_sum_at(x)}"
