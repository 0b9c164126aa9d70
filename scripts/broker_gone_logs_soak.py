"""Issue 40's acceptance, a soak run by hand (``python scripts/broker_gone_logs_soak.py``, two
minutes; it starts a broker and Spark, so under ``flock /tmp/sparkpoint-heavy.lock``): after
a broker is stopped for good, a running job's logs carry at most one line per Kafka client
per minute about it, over an 80 s window. CI checks the same in seconds:
``tests/connectors/kafka/test_idle_readers.py`` (a real broker stopped for good: its pooled
reader is closed and one line about it reaches the log; ``ClientLog`` and kafka-python's
loggers pass one line a minute).

The job (unbounded Kafka → running sum → Kafka EXACTLY_ONCE,
``tests/connectors/kafka/broker_gone_driver.py``) runs in its own driver process whose
stderr is a file: the driver's and Spark's lines, its Python workers' (Spark copies them to
its own stderr) and librdkafka's own. A ``sitecustomize`` on the job's ``PYTHONPATH`` gives
every Python process of the job (driver and workers) a log format with time, process and
logger, so each client's lines are told apart."""

from __future__ import annotations

import collections
import itertools
import json
import os
import re
import socket
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.connectors.kafka.kafka_jobs import KEYS, expected_output, read_committed
from tests.fixtures.kafka import KafkaBroker, ordered_producer

pytestmark = pytest.mark.spark  # a broker JVM, and Spark in a driver subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "connectors", "kafka", "broker_gone_driver.py")
# The test JVM options of the suite (tests/conftest.py) for the job's Spark.
os.environ.setdefault("SPARK_CONF_DIR", os.path.join(ROOT, "tests", "spark-conf"))
N = 400
# Past the pooled readers' idle time (60 s) and their reaper's period (15 s): the window
# covers a reader's whole life after the stop, and a client logging every 30 s (librdkafka
# suppresses an identical error for 30 s) shows two lines within a minute.
WINDOW_S = 80.0
# Python's default level (WARNING, as a job logs without a logging setup) with a format
# that tells processes apart; every line a Kafka client's ``ClientLog`` passes is shown
# whatever its level (the strictest view), and the job's parser says where it runs.
SITECUSTOMIZE = (
    "import logging, sys\n"
    "logging.basicConfig(stream=sys.stderr, level=logging.WARNING,\n"
    "    format='PYLOG %(created).3f %(process)d %(name)s %(levelname)s %(message)s')\n"
    "logging.getLogger('sparkpoint.kafka.client').setLevel(logging.DEBUG)\n"
    "logging.getLogger('broker_gone_driver').setLevel(logging.INFO)\n"
)
_PYLOG = re.compile(r"PYLOG (\d+\.\d+) (\d+) (\S+) (\w+) (.*)")
_CLIENT = re.compile(r"^\S+ \[([^\]]+)\]")  # ClientLog's "<facility> [<client name>] ..."
_RDKAFKA = re.compile(r"%\d\|(\d+\.\d+)\|[A-Z_]+\|([^|]+)\|")  # librdkafka's own stderr


def _about(line: str, port: int) -> bool:
    """Whether ``line`` names the broker's address (its port, not a longer number)."""
    return re.search(rf"(127\.0\.0\.1|localhost)(:|', ){port}(?!\d)", line) is not None


def _client_lines(log: str, after: float) -> dict[str, list[float]]:
    """The times of the lines logged after ``after`` (epoch seconds) by each Kafka client,
    all about the one broker (kafka-python names it as ``('127.0.0.1', port)`` or
    ``bootstrap-0``, not always by address): a ``ClientLog`` by process and client name,
    another Kafka logger (kafka-python's) by process and logger, librdkafka's own stderr by
    client name (its lines carry no process id: two processes' clients of one name count
    as one)."""
    clients: dict[str, list[float]] = collections.defaultdict(list)
    for line in log.splitlines():
        py = _PYLOG.search(line)
        raw = _RDKAFKA.search(line)
        if py is not None:
            at, pid, logger, message = float(py[1]), py[2], py[3], py[5]
            client = _CLIENT.match(message)
            if logger == "sparkpoint.kafka.client" and client is not None:
                key = f"{pid} {client[1]}"
            elif logger.startswith(("kafka", "sparkpoint.kafka")):
                key = f"{pid} {logger}"
            else:
                continue  # not a Kafka client's line (a failure's message: see _other)
        elif raw is not None:
            at, key = float(raw[1]), f"rdkafka {raw[2]}"
        else:
            continue
        if at >= after:
            clients[key].append(at)
    return clients


def _other_lines(log: str, after_line: int, port: int) -> list[str]:
    """The lines about the broker that are no Kafka client's (failures' messages, stack
    traces), from line ``after_line`` on: printed, not limited."""
    out = []
    for line in log.splitlines()[after_line:]:
        py = _PYLOG.search(line)
        client = py is not None and py[3].startswith(("kafka", "sparkpoint.kafka"))
        if _about(line, port) and not client and _RDKAFKA.search(line) is None:
            out.append(line)
    return out


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_a_broker_stopped_for_good_logs_at_most_one_line_per_client_a_minute(
    tmp_path: Any,
) -> None:
    name = "broker-gone"
    broker = KafkaBroker()
    proc = None
    log_path = tmp_path / "job.log"
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    try:
        broker.start()
        port = broker.port
        broker.create_topic(f"{name}-in", 2)
        broker.create_topic(f"{name}-out", 2)
        producer = ordered_producer(broker.bootstrap_servers)
        for x in range(N):
            producer.produce(f"{name}-in", f"{x % KEYS},{x}".encode(), partition=x % 2)
        assert producer.flush(30) == 0
        job = {"bootstrap": broker.bootstrap_servers, "name": name, "dir": str(tmp_path)}
        env = dict(
            os.environ,
            PYSPARK_PYTHON=sys.executable,
            SPARK_LOCAL_IP="127.0.0.1",
            PYTHONPATH=os.pathsep.join([str(site), ROOT, os.environ.get("PYTHONPATH", "")]),
        )
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, SCRIPT, json.dumps(job)],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )
        # The job read and committed its input: its readers exist, pooled in its workers.
        deadline = time.monotonic() + 240
        while collections.Counter(read_committed(broker.bootstrap_servers, f"{name}-out", 5)) != (
            expected_output(N)
        ):
            assert proc.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, "the job's output is not complete in 240 s"
            time.sleep(1)
        # The Python workers' logs reach the file (the job's parser logs its first records).
        workers = re.findall(r"PYLOG \S+ (\d+) broker_gone_driver INFO", log_path.read_text())
        assert workers and any(int(pid) != proc.pid for pid in workers), workers
        lines_before = len(log_path.read_text().splitlines())
        stopped_at = time.time()
        broker.stop()  # for good: its process ends and its files are removed
        # The fault fired: nothing answers on the broker's port any more.
        assert broker.process is None and not _answers(port)
        time.sleep(WINDOW_S)
        assert proc.poll() is None, log_path.read_text()[-3000:]
        assert proc.stdin is not None
        proc.stdin.write(b"cancel\n")
        proc.stdin.flush()
        assert proc.wait(timeout=300) == 0, log_path.read_text()[-3000:]
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
        broker.stop()
    text = log_path.read_text()
    results = [x[len("RESULT ") :] for x in text.splitlines() if x.startswith("RESULT ")]
    assert len(results) == 1, text[-3000:]
    result = json.loads(results[0])
    clients = _client_lines(text, stopped_at)
    others = _other_lines(text, lines_before, port)
    print(
        f"broker gone for {WINDOW_S:.0f} s: {len(clients)} clients logged "
        f"{sum(map(len, clients.values()))} lines about it "
        f"({ {k: len(v) for k, v in clients.items()} }); {len(others)} other lines "
        f"name it (failures); restarts {result['restarts']}, cancel {result['cancel_seconds']} s"
    )
    # The job kept running (or restarting) without its broker until it was cancelled.
    assert result["ended_before_cancel"] is False and result["error"] is None, result
    assert result["status"] == "CANCELED", result
    # The readers saw their broker go: at least one line about it reached the log.
    assert any("sparkpoint-kafka-reader#consumer-" in k for k in clients), clients
    for client, times in clients.items():
        times.sort()
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert all(gap >= 59.0 for gap in gaps), (client, times)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-s", "-p", "no:cacheprovider"]))
