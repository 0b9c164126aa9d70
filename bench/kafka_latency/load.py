"""The benchmark's load side: a backlog writer, a paced producer and a ``read_committed``
consumer, each in a process of its own (so that neither waits on the other's interpreter
lock), and the CPU time of an engine's process tree from ``/proc``.

A record is ``"<key>,<producer wall-clock ms>"``; every engine writes ``"<key>,<count>,<ms>"``,
so the consumer measures end-to-end latency as its receive time minus the record's ms.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import time
from array import array
from typing import Any

_CONSUMER_GROUP = "kafka-latency-bench"
# Fresh interpreters: the parent has librdkafka threads (the broker's admin client) to not fork.
_MP = mp.get_context("spawn")


def _producer(client: dict[str, str]) -> Any:
    from confluent_kafka import Producer

    return Producer(
        {
            **client,
            "linger.ms": 5,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 1_000_000,
            "log_level": 0,
        }
    )


def write_backlog(client: dict[str, str], topic: str, n: int, keys: int, seed: int = 1) -> float:
    """Write ``n`` records over ``keys`` random keys as fast as one producer can; seconds.
    ``client`` is librdkafka's configuration (``bootstrap.servers``, security settings)."""
    rnd = random.Random(seed)
    producer = _producer(client)
    t0 = time.time()
    ms = int(t0 * 1000)
    for i in range(n):
        value = f"{rnd.randrange(keys)},{ms}".encode()
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 20_000 == 0:
            producer.poll(0)
            ms = int(time.time() * 1000)
    if producer.flush(120) != 0:
        raise RuntimeError(f"the backlog of {topic} was not all acknowledged")
    return time.time() - t0


def _paced(
    client: dict[str, str], topic: str, rate: int, seconds: float, keys: int, done: Any
) -> None:
    """Produce ``rate`` records a second for ``seconds`` in 5 ms ticks, each record stamped
    with its send time; ``done`` receives the count (a tick late is caught up, not dropped)."""
    rnd = random.Random(rate)
    producer = _producer(client)
    tick = 0.005
    t0 = time.time()
    sent = 0
    while True:
        now = time.time()
        if now - t0 >= seconds:
            break
        due = int((now - t0) * rate)
        ms = int(now * 1000)
        while sent < due:
            try:
                producer.produce(topic, f"{rnd.randrange(keys)},{ms}".encode())
                sent += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        time.sleep(max(0.0, tick - (time.time() - now)))
    producer.flush(120)
    done.send(sent)


class PacedProducer:
    """``rate`` records/s into ``topic`` for ``seconds``, in a process; ``join()`` gives the
    number sent."""

    def __init__(
        self, client: dict[str, str], topic: str, rate: int, seconds: float, keys: int
    ) -> None:
        self.start = time.time()
        recv, send = _MP.Pipe(duplex=False)
        self._recv = recv
        self._proc = _MP.Process(
            target=_paced, args=(client, topic, rate, seconds, keys, send), daemon=True
        )
        self._proc.start()

    def join(self) -> int:
        """Wait for the producer; the records it sent."""
        sent = int(self._recv.recv())
        self._proc.join(30)
        return sent


def _consume(client: dict[str, str], topic: str, count: Any, conn: Any) -> None:
    """Read ``topic`` read_committed from its start; keep (receive ms, producer ms) of every
    record; answer ``("window", lo, hi)`` with the latencies of records stamped in [lo, hi)."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            **client,
            "group.id": f"{_CONSUMER_GROUP}-{topic}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 5,
            "log_level": 0,
        }
    )
    consumer.subscribe([topic])
    received = array("d")
    stamped = array("q")
    while True:
        msgs = consumer.consume(5000, 0.005)
        if msgs:
            now = time.time() * 1000
            n = 0
            for m in msgs:
                if m.error() is None:
                    stamped.append(int(m.value().rpartition(b",")[2]))
                    n += 1
            received.extend([now] * n)
            count.value += n
        if conn.poll():
            cmd = conn.recv()
            if cmd[0] == "stop":
                break
            lo, hi = cmd[1], cmd[2]
            conn.send([r - s for r, s in zip(received, stamped, strict=True) if lo <= s < hi])
    consumer.close()
    conn.close()


class LatencyConsumer:
    """A read_committed consumer of the engine's output topic, in a process: ``count`` of the
    records read so far, ``latencies_ms(lo, hi)`` of those the producer stamped in [lo, hi)."""

    def __init__(self, client: dict[str, str], topic: str) -> None:
        self._count = _MP.Value("q", 0, lock=False)
        self._conn, child = _MP.Pipe()
        self._proc = _MP.Process(
            target=_consume, args=(client, topic, self._count, child), daemon=True
        )
        self._proc.start()

    @property
    def count(self) -> int:
        """Records read so far."""
        return int(self._count.value)

    def latencies_ms(self, lo_ms: float, hi_ms: float) -> list[float]:
        """End-to-end latencies (ms) of the records stamped in [lo_ms, hi_ms)."""
        self._conn.send(("window", lo_ms, hi_ms))
        return list(self._conn.recv())

    def wait_for(self, n: int, timeout: float, alive: Any = None) -> bool:
        """Wait until ``n`` records are read (True), ``timeout`` passes or ``alive()`` fails."""
        deadline = time.time() + timeout
        while self.count < n:
            if time.time() > deadline or (alive is not None and not alive()):
                return False
            time.sleep(0.05)
        return True

    def stop(self) -> None:
        """End the consumer process."""
        self._conn.send(("stop",))
        self._proc.join(30)
        if self._proc.is_alive():
            self._proc.kill()


_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and of its reaped children)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    # After the command: state ppid ... utime(14) stime(15) cutime(16) cstime(17), 1-based.
    ppid = int(fields[1])
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
    return ppid, ticks / _TICKS


def tree_pids(root: int) -> list[int]:
    """``root`` and every process below it."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                stats[int(name)] = st
    children: dict[int, list[int]] = {}
    for pid, (ppid, _cpu) in stats.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            out.append(pid)
            todo.extend(children.get(pid, []))
    return out


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds (user + system) of ``root``'s process tree, reaped children included."""
    total = 0.0
    for pid in tree_pids(root):
        st = _stat(pid)
        if st is not None:
            total += st[1]
    return total
