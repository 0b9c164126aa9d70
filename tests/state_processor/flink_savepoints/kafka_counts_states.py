"""kafka_counts.py's input, and what the import needs: the counter's state descriptors,
its key type and the Kafka source's uid.

The input topic holds FIRST_HALF then SECOND_HALF, each record in the partition
``key % 2``; the first half on PyFlink reads FIRST_HALF and stops with a savepoint, the
second half (on PyFlink or sparkpoint) reads on up to ``stops()``.
"""

from sparkpoint.common import Types
from sparkpoint.datastream.state import ValueStateDescriptor

TOPIC_IN = "flink-savepoint-counts-in"
PARTITIONS = 2
FIRST_HALF = [(i * 7 % 5 + 1, i % 9 + 1) for i in range(20)]  # (key, amount)
SECOND_HALF = [(i * 3 % 6 + 1, i % 4 + 2) for i in range(10)]  # keys 1 and 4

STATES = {
    "counter": [
        ValueStateDescriptor("count", Types.LONG()),
        ValueStateDescriptor("total", Types.INT()),
    ]
}
KEY_TYPES = {"counter": Types.LONG()}
KAFKA_SOURCES = ("source",)


def partition_of(key: int) -> int:
    return key % PARTITIONS


def stops() -> str:
    """Each partition's end after both halves, as kafka_counts.py takes it."""
    ends = [0] * PARTITIONS
    for key, _ in FIRST_HALF + SECOND_HALF:
        ends[partition_of(key)] += 1
    return ",".join(f"{p}:{end}" for p, end in enumerate(ends))


def produce(bootstrap: str, records: list[tuple[int, int]]) -> None:
    """Append ``records`` to the input topic, each to its key's partition, in order."""
    from tests.fixtures.kafka import ordered_producer

    producer = ordered_producer(bootstrap)
    for key, amount in records:
        producer.produce(TOPIC_IN, value=f"{key},{amount}".encode(), partition=partition_of(key))
    if producer.flush(30) != 0:
        raise RuntimeError("records of the input topic not delivered in 30 s")
