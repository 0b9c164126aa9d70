"""Python workers' pooled Kafka readers after their cluster went away (issue 40 item 4): an
idle reader is closed (no more reconnecting), and librdkafka's log of each reader reaches
the logs at most once a minute (a stopped broker makes it log many refused connections a
second: 60 in 3 s, seen here)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from sparkpoint.connectors import kafka_source
from sparkpoint.connectors.kafka_readers import ClientLog, ReaderPool
from sparkpoint.connectors.source import SplitRange
from tests.connectors.kafka.source_jobs import produce, unbounded_source
from tests.fixtures.kafka import KafkaBroker


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_client_log_passes_one_line_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    log = ClientLog(60.0, clock)
    with caplog.at_level(logging.INFO, logger="sparkpoint.kafka.client"):
        for i in range(120):  # two a second for a minute
            clock.now = i / 2
            log.log(logging.ERROR, "%s [%s] %s", "FAIL", "r#consumer-1", f"refused {i}")
        clock.now = 60.0
        log.log(logging.ERROR, "%s [%s] %s", "FAIL", "r#consumer-1", "refused again")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "FAIL [r#consumer-1] refused 0",
        "FAIL [r#consumer-1] refused again (119 more lines of this client not shown)",
    ]


def test_pool_closes_idle_readers() -> None:
    closed: list[str] = []

    class Reader:
        def __init__(self, name: str) -> None:
            self.name = name

        def close(self) -> None:
            closed.append(self.name)

    key = (("k", "a"),)
    pool = ReaderPool(idle_seconds=1000.0, per_key=2)
    pool.put(key, Reader("a"))
    pool.put(key, Reader("a2"))
    pool.put(key, Reader("a3"))  # a third idle reader of one configuration: the oldest goes
    assert closed == ["a"] and len(pool) == 2
    assert pool.take(key).name == "a3"  # the most recently used
    pool.put(key, Reader("a3"))
    assert pool.close_idle(time.monotonic() + 10) == 0
    assert pool.close_idle(time.monotonic() + 1000) == 2
    assert sorted(closed) == ["a", "a2", "a3"] and len(pool) == 0 and pool.closed_idle == 2
    assert pool.take(key) is None


@pytest.mark.spark  # starts a broker JVM of its own (it stops it for good)
def test_readers_of_a_stopped_broker_are_closed_and_quiet(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's reader read a range, then its (only) broker stops for good: the idle
    reader is closed by the pool's thread, and its log holds at most one line."""
    pool = ReaderPool(idle_seconds=4.0)
    monkeypatch.setattr(kafka_source, "READERS", pool)
    caplog.set_level(logging.DEBUG, logger="sparkpoint.kafka.client")
    broker = KafkaBroker()
    try:
        broker.start()
        port = broker.port
        topic = "idle-readers"
        broker.create_topic(topic, 1)
        produce(broker.bootstrap_servers, topic, [(0, str(i), None) for i in range(10)])
        source = unbounded_source(broker.bootstrap_servers).set_topics(topic).build()
        info = {"topic": topic, "partition": 0}
        read: list[Any] = []
        for values, _ts in source.read_batches(SplitRange(f"{topic}-0", 0, 10, info, False)):
            read += values
        assert read == [str(i) for i in range(10)]
        assert len(pool) == 1
    finally:
        broker.stop()
    assert broker.process is None  # the fault: the broker is gone for good
    deadline = time.monotonic() + 30
    while len(pool) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (len(pool), pool.closed_idle) == (0, 1)
    time.sleep(2)  # a closed reader logs nothing more
    # The reader saw its broker go and tried to reconnect (tens of refused connections in
    # 4 s, queued until its close): one line about it reached the log (seen: "Disconnected:
    # connection closed by peer"), the rest were held back.
    lines = [r.getMessage() for r in caplog.records if r.name == "sparkpoint.kafka.client"]
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0], lines


def test_kafka_python_loggers_pass_one_line_a_minute_and_bootstrap_sees_all(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """kafka-python logs every reconnect to a lost broker (76 lines in 80 s from one logger,
    seen): each of its loggers passes one line a minute, while the bootstrap's failure
    collector (a refused login ends the wait with its cause) still sees every record."""
    from sparkpoint.connectors.kafka_readers import throttle_kafka_python
    from sparkpoint.connectors.kafka_transactions import _BootstrapFailures

    throttle_kafka_python()
    throttle_kafka_python()  # idempotent: one filter per logger
    manager = logging.getLogger("kafka.net.manager")
    assert sum(type(f).__name__ == "_Throttle" for f in manager.filters) == 1
    with caplog.at_level(logging.WARNING, logger="kafka"), _BootstrapFailures() as failures:
        for i in range(5):
            manager.error("Bootstrap attempt to bootstrap-0 failed: refused %d", i)
            logging.getLogger("kafka.cluster").warning("no metadata %d", i)
    lines = [r.getMessage() for r in caplog.records]
    # One line per logger (this process's earlier lines may already have used the minute).
    assert len([m for m in lines if m.startswith("Bootstrap")]) <= 1
    assert len([m for m in lines if m.startswith("no metadata")]) <= 1
    assert len(failures.seen) == 5
