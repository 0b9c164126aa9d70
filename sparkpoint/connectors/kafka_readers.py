"""The reading consumers of one Python worker, kept between ranges and closed when idle.

A worker runs one task at a time, and a new consumer per range cost its connections,
metadata and threads every epoch, so ``KafkaSource`` keeps each worker's readers between
ranges (see docs/kafka-source.md). An idle reader still holds its connections, and
librdkafka reconnects forever to a broker that went away, logging every refused connection
(many per second on a stopped broker). So a reader unused for ``IDLE_SECONDS`` is closed by a
daemon thread, and every reader's librdkafka log goes through ``ClientLog``: at most one line
per reader per ``LOG_INTERVAL_SECONDS``, with the count of lines held back. The sink's pooled
producers (``kafka_producers``, ``kafka_writers``) log through it too.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "IDLE_SECONDS",
    "KAFKA_PYTHON_LOGGERS",
    "LOG_INTERVAL_SECONDS",
    "ClientLog",
    "ReaderPool",
    "throttle_kafka_python",
]

_LOG = logging.getLogger("sparkpoint.kafka.client")
IDLE_SECONDS = 60.0
LOG_INTERVAL_SECONDS = 60.0

ReaderKey = tuple[tuple[str, str], ...]


class ClientLog:
    """A librdkafka client's ``logger`` (confluent-kafka calls ``log(level, fmt, *args)``):
    passes at most one line per ``interval`` seconds to ``sparkpoint.kafka.client``; the
    next line passed says how many were held back in between."""

    def __init__(
        self, interval: float = LOG_INTERVAL_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._interval = interval
        self._clock = clock
        self._last: float | None = None
        self._held = 0
        self._lock = threading.Lock()

    def log(self, level: int, fmt: str, *args: Any) -> None:
        """One librdkafka log line."""
        now = self._clock()
        with self._lock:
            if self._last is not None and now - self._last < self._interval:
                self._held += 1
                return
            held, self._held, self._last = self._held, 0, now
        if held:
            fmt += f" ({held} more lines of this client not shown)"
        _LOG.log(level, fmt, *args)


# kafka-python's loggers that log a lost broker (tens of lines a minute each, seen).
KAFKA_PYTHON_LOGGERS = (
    "kafka.cluster",
    "kafka.conn",
    "kafka.client_async",
    "kafka.net.connection",
    "kafka.net.manager",
    "kafka.net.transport",
)


class _Throttle(logging.Filter):
    """Passes at most one record per ``interval`` seconds of the logger it is on."""

    def __init__(self, interval: float) -> None:
        super().__init__()
        self._interval = interval
        self._last: float | None = None
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        with self._lock:
            if self._last is not None and now - self._last < self._interval:
                return False
            self._last = now
        return True


def throttle_kafka_python(interval: float = LOG_INTERVAL_SECONDS) -> None:
    """At most one line per ``interval`` from each of kafka-python's loggers in this
    process (idempotent): its clients log every reconnect to a broker that went away."""
    for name in KAFKA_PYTHON_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _Throttle) for f in logger.filters):
            logger.addFilter(_Throttle(interval))


class ReaderPool:
    """Idle reading consumers by configuration, up to ``per_key`` of each (a task reads
    several ranges at once, ``task_group``); those idle for ``idle_seconds`` are closed."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS, per_key: int = 8) -> None:
        self.idle_seconds = idle_seconds
        self.per_key = per_key
        self._idle: dict[ReaderKey, list[tuple[Any, float]]] = {}
        self._lock = threading.Lock()
        self._reaper_pid: int | None = None  # the process whose thread closes idle readers
        self.closed_idle = 0  # readers closed for being idle, so far

    def take(self, key: ReaderKey) -> Any:
        """The most recently used idle reader of configuration ``key``, or None."""
        with self._lock:
            readers = self._idle.get(key)
            if not readers:
                return None
            consumer, _since = readers.pop()
            if not readers:
                del self._idle[key]
            return consumer

    def put(self, key: ReaderKey, consumer: Any) -> None:
        """Keep ``consumer`` (unassigned) for a next range of its configuration; beyond
        ``per_key`` idle ones, the longest idle is closed."""
        with self._lock:
            readers = self._idle.setdefault(key, [])
            readers.append((consumer, time.monotonic()))
            stale = readers.pop(0) if len(readers) > self.per_key else None
            self._start_reaper()
        if stale is not None:
            stale[0].close()

    def __len__(self) -> int:
        with self._lock:
            return sum(len(readers) for readers in self._idle.values())

    def close_idle(self, now: float | None = None) -> int:
        """Close the readers idle for ``idle_seconds`` or more; how many."""
        now = time.monotonic() if now is None else now
        closing: list[Any] = []
        with self._lock:
            for key in list(self._idle):
                readers = self._idle[key]
                closing.extend(c for c, since in readers if now - since >= self.idle_seconds)
                readers[:] = [(c, t) for c, t in readers if now - t < self.idle_seconds]
                if not readers:
                    del self._idle[key]
            self.closed_idle += len(closing)
        for consumer in closing:
            consumer.close()
        return len(closing)

    def _start_reaper(self) -> None:
        # A forked worker does not inherit its parent's thread: start one per process.
        if self._reaper_pid == os.getpid():
            return
        self._reaper_pid = os.getpid()
        threading.Thread(target=self._reap, name="sparkpoint-kafka-readers", daemon=True).start()

    def _reap(self) -> None:
        while True:
            time.sleep(max(0.05, self.idle_seconds / 4))
            try:
                self.close_idle()
            except Exception:  # a failed close must not end the thread
                _LOG.warning("Closing an idle Kafka reader failed", exc_info=True)
