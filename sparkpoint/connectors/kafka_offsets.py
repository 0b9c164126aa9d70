"""Where a Kafka split starts and stops: PyFlink's ``KafkaTopicPartition``,
``KafkaOffsetResetStrategy`` and ``KafkaOffsetsInitializer``, resolved on the driver with a
confluent-kafka consumer."""

from __future__ import annotations

from enum import Enum
from typing import Any

__all__ = ["KafkaOffsetResetStrategy", "KafkaOffsetsInitializer", "KafkaTopicPartition"]

# librdkafka's "no committed offset" (RD_KAFKA_OFFSET_INVALID).
_OFFSET_INVALID = -1001


class KafkaTopicPartition:
    """A partition of a topic, as Kafka's ``TopicPartition``."""

    def __init__(self, topic: str, partition: int) -> None:
        self._topic = topic
        self._partition = partition

    @property
    def topic(self) -> str:
        """The topic's name."""
        return self._topic

    @property
    def partition(self) -> int:
        """The partition's number."""
        return self._partition

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KafkaTopicPartition):
            return False
        return self._topic == other._topic and self._partition == other._partition

    def __hash__(self) -> int:
        return 31 * (31 + self._partition) + hash(self._topic)

    def __repr__(self) -> str:
        return f"{self._topic}-{self._partition}"


class KafkaOffsetResetStrategy(Enum):
    """What to do where no (valid) offset is known, as Kafka's ``OffsetResetStrategy``."""

    LATEST = 0
    EARLIEST = 1
    NONE = 2


class KafkaOffsetsInitializer:
    """Starting or stopping offsets of every partition: earliest, latest, committed, by
    timestamp, or given. Build one with the static methods."""

    def __init__(
        self,
        kind: str,
        reset: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.NONE,
        timestamp: int | None = None,
        offsets: dict[KafkaTopicPartition, int] | None = None,
    ) -> None:
        self.kind = kind
        self.reset = reset
        self.timestamp_ms = timestamp
        self.given = dict(offsets or {})

    @staticmethod
    def committed_offsets(
        offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.NONE,
    ) -> KafkaOffsetsInitializer:
        """The consumer group's committed offsets; where there are none, the reset strategy
        (NONE: the job fails)."""
        return KafkaOffsetsInitializer("committed", offset_reset_strategy)

    @staticmethod
    def timestamp(timestamp: int) -> KafkaOffsetsInitializer:
        """The first offset whose record timestamp is at least ``timestamp`` (ms); the end of
        the partition where there is none."""
        return KafkaOffsetsInitializer("timestamp", timestamp=int(timestamp))

    @staticmethod
    def earliest() -> KafkaOffsetsInitializer:
        """The earliest offset still in each partition."""
        return KafkaOffsetsInitializer("earliest")

    @staticmethod
    def latest() -> KafkaOffsetsInitializer:
        """The end of each partition (when the offsets are resolved)."""
        return KafkaOffsetsInitializer("latest")

    @staticmethod
    def offsets(
        offsets: dict[KafkaTopicPartition, int],
        offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.EARLIEST,
    ) -> KafkaOffsetsInitializer:
        """The given offset per partition; the committed offset, else the reset strategy, for
        a partition not given or out of range."""
        return KafkaOffsetsInitializer("offsets", offset_reset_strategy, offsets=offsets)

    def get_auto_offset_reset_strategy(self) -> KafkaOffsetResetStrategy:
        """Where a reader whose offset is out of the partition's range goes, as Flink's
        ``OffsetsInitializer.getAutoOffsetResetStrategy``: earliest for ``earliest()``,
        latest for ``latest()`` and ``timestamp()``, the given strategy for
        ``committed_offsets()`` and ``offsets()``. ``KafkaSource`` sets its readers'
        ``auto.offset.reset`` from the starting offsets' strategy (never below a partition's
        log start, which it handles itself: see ``docs/kafka-source.md``)."""
        if self.kind == "earliest":
            return KafkaOffsetResetStrategy.EARLIEST
        if self.kind in ("latest", "timestamp"):
            return KafkaOffsetResetStrategy.LATEST
        return self.reset

    def resolve(self, consumer: Any, partitions: list[KafkaTopicPartition]) -> dict[str, int]:
        """The offset of each partition (keyed ``topic-partition``), asked of the brokers
        through ``consumer`` (a confluent-kafka ``Consumer``)."""
        from confluent_kafka import TopicPartition

        bounds = {
            repr(tp): consumer.get_watermark_offsets(
                TopicPartition(tp.topic, tp.partition), timeout=30, cached=False
            )
            for tp in partitions
        }
        out: dict[str, int] = {}
        if self.kind == "earliest":
            return {k: lo for k, (lo, _hi) in bounds.items()}
        if self.kind == "latest":
            return {k: hi for k, (_lo, hi) in bounds.items()}
        if self.kind == "timestamp":
            ts = int(self.timestamp_ms or 0)
            asked = [TopicPartition(tp.topic, tp.partition, ts) for tp in partitions]
            for tp, found in zip(partitions, consumer.offsets_for_times(asked, timeout=30)):
                out[repr(tp)] = found.offset if found.offset >= 0 else bounds[repr(tp)][1]
            return out
        committed: dict[str, int] = {}
        if self.kind == "committed" or any(tp not in self.given for tp in partitions):
            asked = [TopicPartition(tp.topic, tp.partition) for tp in partitions]
            for tp, found in zip(partitions, consumer.committed(asked, timeout=30)):
                if found.offset != _OFFSET_INVALID:
                    committed[repr(tp)] = found.offset
        for tp in partitions:
            key = repr(tp)
            lo, hi = bounds[key]
            offset = self.given.get(tp) if self.kind == "offsets" else None
            if offset is None or not lo <= offset <= hi:
                offset = committed.get(key)
            if offset is None or not lo <= offset <= hi:
                offset = self._reset(key, lo, hi)
            out[key] = offset
        return out

    def _reset(self, key: str, lo: int, hi: int) -> int:
        if self.reset is KafkaOffsetResetStrategy.EARLIEST:
            return lo
        if self.reset is KafkaOffsetResetStrategy.LATEST:
            return hi
        raise RuntimeError(
            f"No committed (or valid) offset for partition {key} and the offset reset "
            "strategy is NONE"
        )
