"""A hanging transaction made on purpose, on any broker the given client properties reach
(Java's names, as the sink takes them; a PLAINTEXT broker's bootstrap servers alone or a
secured one's SASL_SSL settings): a transaction committed or aborted at its coordinator,
then records of its producer id and epoch appended to partition 0 with the broker's
partition verification off for a moment (a raw ``Produce`` over kafka-python's
authenticated connection), so the partition has a transaction open that its coordinator
has ended (``sparkpoint.connectors.kafka_hanging``). The principal must be allowed the
broker's configuration and the transactional id (an admin)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Any

from sparkpoint.connectors.kafka_client_config import client_config
from sparkpoint.connectors.kafka_transactions import TransactionAdmin

_VERIFICATION = "transaction.partition.verification.enable"
_INVALID_TXN_STATE = 48


def _kafka_python(props: Mapping[str, str]) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(**client_config(props).kafka_python)


def transaction(
    props: Mapping[str, str], tid: str, topic: str, values: list[bytes], commit: bool
) -> None:
    """A transaction of ``values`` in partition 0 on ``tid``, committed or aborted."""
    from confluent_kafka import Producer

    conf = {**client_config(props).librdkafka, "transactional.id": tid, "log_level": 0}
    producer = Producer(conf)
    producer.init_transactions(30)
    producer.begin_transaction()
    for v in values:
        producer.produce(topic, v, partition=0)
    assert producer.flush(30) == 0
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


@contextlib.contextmanager
def _verification_off(admin: Any, broker_id: str) -> Iterator[None]:
    """The broker's transaction verification off (it refuses records of a producer whose
    transaction the coordinator has not opened on the partition); on again after."""
    from kafka.admin import ConfigResource, ConfigResourceType

    def put(value: str) -> None:
        resource = ConfigResource(
            ConfigResourceType.BROKER, broker_id, configs={_VERIFICATION: value}
        )
        assert admin.alter_configs([resource]) == {"broker": {broker_id: "OK"}}

    put("false")
    try:
        yield
    finally:
        put("true")


def append_without_coordinator(
    props: Mapping[str, str], tid: str, topic: str, values: list[bytes], broker_id: str = "1"
) -> None:
    """Records of ``tid``'s producer id and epoch in partition 0 of ``topic`` (led by
    ``broker_id``), in a transaction its coordinator does not know."""
    from kafka import TopicPartition
    from kafka.protocol.producer.produce import ProduceRequest
    from kafka.record.memory_records import MemoryRecordsBuilder

    txns = TransactionAdmin(props)
    d = txns.describe(tid)
    txns.close()
    admin = _kafka_python(props)
    try:
        tp = TopicPartition(topic, 0)
        (state,) = [
            p
            for p in admin.describe_producers([tp])[tp].active_producers
            if p.producer_id == d.producer_id
        ]
        records = MemoryRecordsBuilder(
            magic=2,
            compression_type=0,
            batch_size=1 << 20,
            transactional=True,
            producer_id=d.producer_id,
            producer_epoch=d.producer_epoch,
            base_sequence=state.last_sequence + 1,
        )
        for v in values:
            records.append(int(time.time() * 1000), None, v)
        records.close()
        data = ProduceRequest.TopicProduceData

        def request() -> Any:  # v9: topics by name (v13 names them by id)
            return ProduceRequest(
                transactional_id=tid,
                acks=-1,
                timeout_ms=30_000,
                topic_data=[
                    data(
                        name=topic,
                        partition_data=[
                            data.PartitionProduceData(index=0, records=records.buffer())
                        ],
                    )
                ],
                max_version=9,
            )

        async def produce() -> int:
            response = await admin._manager.send(request(), node_id=int(broker_id))
            ((code,),) = [[p.error_code for p in t.partition_responses] for t in response.responses]
            return int(code)

        with _verification_off(admin, broker_id):
            # The config reaches the broker through its metadata log: refused until it has.
            deadline = time.monotonic() + 30
            while (code := admin._manager.run(produce)) == _INVALID_TXN_STATE:
                assert time.monotonic() < deadline, "the broker kept verifying transactions"
                time.sleep(0.2)
        assert code == 0
    finally:
        admin.close()
