"""``KafkaSink``'s writers on the sink contract, without Spark: EXACTLY_ONCE output is
invisible until the driver commits; what a failed attempt left open is aborted by the
driver's sweep and nothing else is; a commit redone after a restore is a no-op; producers are
reused across epochs (POOLING) or made ready ahead with fresh ids (INCREMENTING);
AT_LEAST_ONCE is readable when the epoch ends, NONE does not wait."""

from __future__ import annotations

import time
from typing import Any

import pytest

from sparkpoint.common import SimpleStringSchema
from sparkpoint.connectors.kafka_committables import transactional_id_pattern
from sparkpoint.connectors.kafka_producers import STATS as PRODUCER_STATS
from sparkpoint.connectors.kafka_transactions import OpenTransaction, TransactionAdmin
from sparkpoint.connectors.kafka_writers import POOL_STATS
from sparkpoint.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaRecordSerializationSchema,
    KafkaSink,
    TransactionNamingStrategy,
)
from tests.connectors.kafka.kafka_jobs import read_committed
from tests.fixtures.kafka import KafkaBroker
from tests.fixtures.kafka_tools import open_transactional_ids


def _sink(broker: KafkaBroker, topic: str, guarantee: DeliveryGuarantee) -> KafkaSink:
    return (
        KafkaSink.builder()
        .set_bootstrap_servers(broker.bootstrap_servers)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(topic)
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(guarantee)
        .set_transactional_id_prefix(topic)
        .set_transaction_naming_strategy(TransactionNamingStrategy.POOLING)
        .build()
    )


def _ongoing(broker: KafkaBroker, prefix: str) -> list[str]:
    """By Kafka's own tools, not the code under test."""
    return open_transactional_ids(broker.bootstrap_servers, prefix)


def test_exactly_once_commit_abort_lingering_and_recommit(kafka_broker: KafkaBroker) -> None:
    """POOLING ids: a failed attempt's transaction stays open (its id is busy, the retry
    takes the next one) until the driver's sweep aborts it; a commit redone after a
    restore is a no-op; a later epoch reuses the committed id's producer."""
    topic = "sink-eo"
    kafka_broker.create_topic(topic, 1)
    sink = _sink(kafka_broker, topic, DeliveryGuarantee.EXACTLY_ONCE)
    stats = dict(POOL_STATS)
    w = sink.create_writer("job", 1, 0, 1, 0)
    w.write(["a", "b"])
    epoch1 = w.prepare_commit()
    assert [c["transactional_id"] for c in epoch1] == [f"{topic}-0-0"]
    assert epoch1[0]["topics"] == [topic]
    assert _ongoing(kafka_broker, topic) == [f"{topic}-0-0"]
    failed = sink.create_writer("job", 2, 0, 1, 0)  # its task dies after the flush
    failed.write(["lost"])
    failed.prepare_commit()
    retry = sink.create_writer("job", 2, 0, 1, 1)
    retry.write(["c"])
    epoch2 = retry.prepare_commit()
    assert [c["transactional_id"] for c in epoch2] == [f"{topic}-0-2"]
    assert _ongoing(kafka_broker, topic) == [f"{topic}-0-{n}" for n in range(3)]
    assert read_committed(kafka_broker.bootstrap_servers, topic, timeout=3) == []
    sink.commit(epoch1 + epoch2)
    sink.commit(epoch1)  # a restore redoes the commit: nothing changes
    assert sink.abort_lingering([]) == [f"{topic}-0-1"]
    assert read_committed(kafka_broker.bootstrap_servers, topic) == ["a", "b", "c"]
    assert _ongoing(kafka_broker, topic) == []
    later = sink.create_writer("job", 3, 0, 1, 0)
    later.write(["d"])
    epoch3 = later.prepare_commit()
    assert [c["transactional_id"] for c in epoch3] == [f"{topic}-0-0"]
    sink.commit(epoch3)
    assert read_committed(kafka_broker.bootstrap_servers, topic) == ["a", "b", "c", "d"]
    # Three producers made (ids 0, 1, 2), one reused (id 0 in epoch 3).
    assert POOL_STATS["created"] - stats["created"] == 3
    assert POOL_STATS["reused"] - stats["reused"] == 1


def test_exactly_once_abort_and_downscale(kafka_broker: KafkaBroker) -> None:
    topic = "sink-eo-abort"
    kafka_broker.create_topic(topic, 1)
    sink = _sink(kafka_broker, topic, DeliveryGuarantee.EXACTLY_ONCE)
    aborted = sink.create_writer("job", 1, 0, 2, 0)
    aborted.write(["x"])
    sink.abort(aborted.prepare_commit())
    orphan = sink.create_writer("job", 1, 1, 2, 0)
    orphan.write(["y"])
    orphan.prepare_commit()  # subtask 1's output, never committed: the job rescales to 1
    w = sink.create_writer("job", 2, 0, 1, 0)
    w.write(["z"])
    pending = w.prepare_commit()
    assert pending[0]["transactional_id"] == f"{topic}-0-0"  # the aborted one's id, reused
    assert sink.abort_lingering(pending) == [f"{topic}-1-0"]  # the pending one is kept
    assert _ongoing(kafka_broker, topic) == [f"{topic}-0-0"]
    sink.commit(pending)
    assert read_committed(kafka_broker.bootstrap_servers, topic) == ["z"]
    assert _ongoing(kafka_broker, topic) == []


def _plain(broker: KafkaBroker, topic: str, guarantee: DeliveryGuarantee) -> KafkaSink:
    """A NONE or AT_LEAST_ONCE sink whose producer holds records for 3 s before sending."""
    sink = _sink(broker, topic, guarantee)
    sink.properties["linger.ms"] = "3000"
    return sink


def test_at_least_once_flushes_at_the_epoch_end(kafka_broker: KafkaBroker) -> None:
    """The epoch's end waits until Kafka acknowledged every record: all 1000 are readable
    the moment ``prepare_commit`` returns, though the producer would have held them 3 s."""
    topic = "sink-alo"
    kafka_broker.create_topic(topic, 1)
    sink = _plain(kafka_broker, topic, DeliveryGuarantee.AT_LEAST_ONCE)
    assert not sink.transactional
    w = sink.create_writer("job", 1, 0, 1, 0)
    w.write([str(i) for i in range(1000)])
    assert w.prepare_commit() == []
    assert _end_offset(kafka_broker, topic) == 1000
    assert read_committed(kafka_broker.bootstrap_servers, topic) == [str(i) for i in range(1000)]


def test_none_never_waits(kafka_broker: KafkaBroker) -> None:
    """NONE's epoch end returns at once, records still in the producer (none in Kafka yet);
    they arrive later, all 1000, once."""
    topic = "sink-none"
    kafka_broker.create_topic(topic, 1)
    sink = _plain(kafka_broker, topic, DeliveryGuarantee.NONE)
    w = sink.create_writer("job", 1, 0, 1, 0)
    t0 = time.monotonic()
    w.write([str(i) for i in range(1000)])
    assert w.prepare_commit() == []
    assert time.monotonic() - t0 < 1.0
    assert _end_offset(kafka_broker, topic) == 0
    deadline = time.monotonic() + 30
    while _end_offset(kafka_broker, topic) < 1000 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert read_committed(kafka_broker.bootstrap_servers, topic) == [str(i) for i in range(1000)]


def _end_offset(broker: KafkaBroker, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x", "log_level": 0})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        c.close()


def test_incrementing_takes_fresh_ids_with_producers_made_ready(
    kafka_broker: KafkaBroker, monkeypatch: Any
) -> None:
    """INCREMENTING: every transaction gets an id never used before; in a Python worker that
    Spark reuses, the next writer takes the producer made ready in the background (its id
    initialised) whatever its subtask. A retried task's id differs from the failed
    attempt's, whose open transaction the sweep aborts; a redone commit is a no-op."""
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    topic = "sink-eo-incrementing"
    kafka_broker.create_topic(topic, 1)
    sink = _sink(kafka_broker, topic, DeliveryGuarantee.EXACTLY_ONCE)
    sink.naming = TransactionNamingStrategy.INCREMENTING
    stats = dict(PRODUCER_STATS)
    own = transactional_id_pattern(topic)
    w = sink.create_writer("job", 1, 0, 2, 0)
    w.write(["a"])
    epoch1 = w.prepare_commit()
    failed = sink.create_writer("job", 2, 1, 2, 0)  # its task dies after the flush
    failed.write(["lost"])
    failed.prepare_commit()
    retry = sink.create_writer("job", 2, 1, 2, 1)
    retry.write(["b"])
    epoch2 = retry.prepare_commit()
    ids = [epoch1[0]["transactional_id"], failed.transactional_id, epoch2[0]["transactional_id"]]
    assert len(set(ids)) == 3 and all(own.fullmatch(t) for t in ids)
    assert _ongoing(kafka_broker, topic) == sorted(ids)
    sink.commit(epoch1 + epoch2)
    sink.commit(epoch1)  # a restore redoes the commit: nothing changes
    assert sink.abort_lingering([]) == [failed.transactional_id]
    assert read_committed(kafka_broker.bootstrap_servers, topic) == ["a", "b"]
    assert _ongoing(kafka_broker, topic) == []
    # The first writer made its producer itself; the two after it took ready ones.
    assert PRODUCER_STATS["created"] - stats["created"] == 1
    assert PRODUCER_STATS["taken_ready"] - stats["taken_ready"] == 2


def test_pooling_redone_commit_leaves_a_newer_transaction_alone(
    kafka_broker: KafkaBroker,
) -> None:
    """POOLING across a restore: T1 on id X is committed, the same pooled producer begins T2
    on X (same producer id and epoch) and writes r2; a restore redoes T1's commit. The redo
    must not commit T2 (r2 would become visible, and the restored job replays it): T2 stays
    open until the restore's sweep aborts it, and r2 is never read."""
    topic = "sink-eo-pool-restore"
    kafka_broker.create_topic(topic, 1)
    sink = _sink(kafka_broker, topic, DeliveryGuarantee.EXACTLY_ONCE)
    stats = dict(POOL_STATS)
    w1 = sink.create_writer("job", 1, 0, 1, 0)
    w1.write(["r1"])
    epoch1 = w1.prepare_commit()
    sink.commit(epoch1)
    x = f"{topic}-0-0"
    _wait_for_state(kafka_broker, x, "CompleteCommit")  # else the next epoch takes id 1
    w2 = sink.create_writer("job", 2, 0, 1, 0)  # the next epoch, in the same Python worker
    w2.write(["r2"])
    epoch2 = w2.prepare_commit()
    assert POOL_STATS["reused"] - stats["reused"] == 1
    assert [c["transactional_id"] for c in epoch1 + epoch2] == [x, x]
    assert [(c["producer_id"], c["producer_epoch"]) for c in epoch2] == [
        (c["producer_id"], c["producer_epoch"]) for c in epoch1
    ]
    assert epoch2[0]["transaction_start_time_ms"] > epoch1[0]["transaction_start_time_ms"]
    sink.commit(epoch1)  # the restore of epoch 1's checkpoint redoes its commit
    assert _ongoing(kafka_broker, topic) == [x]  # T2 is still open, not committed
    assert read_committed(kafka_broker.bootstrap_servers, topic, timeout=3) == ["r1"]
    assert sink.abort_lingering([]) == [x]
    assert _ongoing(kafka_broker, topic) == []
    assert read_committed(kafka_broker.bootstrap_servers, topic) == ["r1"]


def test_pooling_redone_commit_after_a_fence_of_the_id(kafka_broker: KafkaBroker) -> None:
    """T1 on id X is committed, then another Python worker's producer takes X (a new producer
    epoch) and begins T2. The redone commit of T1 leaves T2 alone; T1 counts as committed
    because T2 began sooner than T1's transaction timeout after it (T1 cannot have timed
    out first), and is refused (records maybe lost) when the timeout is shorter than that."""
    from confluent_kafka import Producer

    topic = "sink-eo-pool-fenced"
    kafka_broker.create_topic(topic, 1)
    sink = _sink(kafka_broker, topic, DeliveryGuarantee.EXACTLY_ONCE)
    w1 = sink.create_writer("job", 1, 0, 1, 0)
    w1.write(["r1"])
    epoch1 = w1.prepare_commit()
    sink.commit(epoch1)
    x = f"{topic}-0-0"
    _wait_for_state(kafka_broker, x, "CompleteCommit")
    other = Producer({**sink.producer_config(), "transactional.id": x})
    other.init_transactions(60)  # another worker's producer of X: the epoch is bumped
    other.begin_transaction()
    time.sleep(0.5)  # T2 begins (its first record) at least this long after T1
    other.produce(topic, b"r2")
    assert other.flush(30) == 0
    sink.commit(epoch1)  # the restore's redo
    assert _ongoing(kafka_broker, topic) == [x]
    sink.properties["transaction.timeout.ms"] = "200"  # shorter than T2's start after T1
    with pytest.raises(RuntimeError, match=f"{x} .* it may have been aborted, its records lost"):
        sink.commit(epoch1)
    assert _ongoing(kafka_broker, topic) == [x]
    del sink.properties["transaction.timeout.ms"]
    assert sink.abort_lingering([]) == [x]
    assert read_committed(kafka_broker.bootstrap_servers, topic) == ["r1"]


def test_pooling_second_restore_of_the_same_checkpoint(kafka_broker: KafkaBroker) -> None:
    """T1 on id X is committed; the same pooled producer begins T2 on X (r2) and the job
    fails before T2's checkpoint completes. The restore redoes T1's commit and its sweep
    aborts T2; the job fails again before its next checkpoint and restores the same
    checkpoint a second time. That redo must count T1 as committed (it was, before T2
    began on its producer epoch), not refuse it as lost; the replayed epoch then commits
    r2 once."""
    topic = "sink-eo-pool-restore-twice"
    kafka_broker.create_topic(topic, 1)
    sink = _sink(kafka_broker, topic, DeliveryGuarantee.EXACTLY_ONCE)
    stats = dict(POOL_STATS)
    x = f"{topic}-0-0"
    w1 = sink.create_writer("job", 1, 0, 1, 0)
    w1.write(["r1"])
    epoch1 = w1.prepare_commit()
    sink.commit(epoch1)
    _wait_for_state(kafka_broker, x, "CompleteCommit")  # else the next epoch takes id 1
    w2 = sink.create_writer("job", 2, 0, 1, 0)
    w2.write(["r2"])
    epoch2 = w2.prepare_commit()  # epoch 2's checkpoint never completes
    assert [c["transactional_id"] for c in epoch2] == [x]
    sink.commit(epoch1)  # the first restore: the redo leaves T2 alone ...
    assert sink.abort_lingering([]) == [x]  # ... and the sweep aborts it
    assert sink.lingering_aborted == [x]
    sink.commit(epoch1)  # the second restore of the same checkpoint
    assert sink.abort_lingering([]) == []
    # The sweep aborted T2 at its own producer id and epoch, not by fencing X: X keeps T2's
    # start time, by which the second redo told T1 superseded.
    _wait_for_state(kafka_broker, x, "CompleteAbort")
    swept = _describe(kafka_broker, x)
    assert (swept.producer_id, swept.producer_epoch, swept.transaction_start_time_ms) == (
        epoch2[0]["producer_id"],
        epoch2[0]["producer_epoch"],
        epoch2[0]["transaction_start_time_ms"],
    )
    assert read_committed(kafka_broker.bootstrap_servers, topic, timeout=3) == ["r1"]
    w3 = sink.create_writer("job", 2, 0, 1, 0)  # epoch 2 replayed, on X's pooled producer
    w3.write(["r2"])
    epoch2_again = w3.prepare_commit()
    assert [c["transactional_id"] for c in epoch2_again] == [x]
    sink.commit(epoch2_again)
    assert read_committed(kafka_broker.bootstrap_servers, topic) == ["r1", "r2"]
    assert _ongoing(kafka_broker, topic) == []
    assert POOL_STATS["created"] - stats["created"] == 1
    assert POOL_STATS["reused"] - stats["reused"] == 2


def test_pooling_restore_after_a_first_write_failed_in_another_worker(
    kafka_broker: KafkaBroker,
) -> None:
    """As above, but T2's task is still running when the restore sweeps (a straggler: the
    sweep no longer fences X, so the broker must refuse its further records), and between
    the two restores the restored run's writer of subtask 0 runs in another Python worker
    (no pooled producer of X) and its first record fails to serialize. That must leave X as
    the sweep left it (a new producer initialising X would leave it no transaction start
    time, and the second restore's redo would refuse T1)."""
    import multiprocessing

    topic = "sink-eo-pool-restore-failed-write"
    kafka_broker.create_topic(topic, 1)
    sink = _sink(kafka_broker, topic, DeliveryGuarantee.EXACTLY_ONCE)
    x = f"{topic}-0-0"
    w1 = sink.create_writer("job", 1, 0, 1, 0)
    w1.write(["r1"])
    epoch1 = w1.prepare_commit()
    sink.commit(epoch1)
    _wait_for_state(kafka_broker, x, "CompleteCommit")
    straggler = sink.create_writer("job", 2, 0, 1, 0)
    straggler.write(["r2"])  # the job fails over while this task still runs
    _wait_for_state(kafka_broker, x, "Ongoing")  # its first record reached the coordinator
    sink.commit(epoch1)  # the first restore
    assert sink.abort_lingering([]) == [x]
    _wait_for_state(kafka_broker, x, "CompleteAbort")
    straggler.write(["late"])
    with pytest.raises(RuntimeError, match="INVALID_TXN_STATE"):
        straggler.prepare_commit()
    worker = multiprocessing.get_context("spawn").Process(
        target=_write_unserializable, args=(kafka_broker.bootstrap_servers, topic)
    )
    worker.start()
    worker.join(120)
    assert worker.exitcode == _SERIALIZER_FAILED  # the injected failure fired, once
    sink.commit(epoch1)  # the second restore of the same checkpoint
    assert sink.abort_lingering([]) == []
    w3 = sink.create_writer("job", 2, 0, 1, 0)  # epoch 2 replayed
    w3.write(["r2"])
    sink.commit(w3.prepare_commit())
    assert read_committed(kafka_broker.bootstrap_servers, topic) == ["r1", "r2"]
    assert _ongoing(kafka_broker, topic) == []


_SERIALIZER_FAILED = 3


def _unserializable(value: Any) -> str:
    raise ValueError(f"cannot choose a topic for {value!r}")


def _write_unserializable(bootstrap_servers: str, topic: str) -> None:
    """In a fresh Python process (another Python worker, its producer pool empty): subtask
    0's writer of the replayed epoch fails on its first record's serialization."""
    import sys

    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(bootstrap_servers)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic_selector(_unserializable)
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix(topic)
        .set_transaction_naming_strategy(TransactionNamingStrategy.POOLING)
        .build()
    )
    writer = sink.create_writer("job", 2, 0, 1, 0)
    try:
        writer.write(["r2"])
    except ValueError:
        sys.exit(_SERIALIZER_FAILED)


def _describe(broker: KafkaBroker, transactional_id: str) -> OpenTransaction:
    admin = TransactionAdmin(broker.bootstrap_servers)
    try:
        return admin.describe(transactional_id)
    finally:
        admin.close()


def _wait_for_state(broker: KafkaBroker, transactional_id: str, state: str) -> None:
    admin = TransactionAdmin(broker.bootstrap_servers)
    try:
        deadline = time.monotonic() + 30
        while admin.describe(transactional_id).state != state:
            assert time.monotonic() < deadline, f"{transactional_id} never reached {state}"
            time.sleep(0.05)
    finally:
        admin.close()
