"""The benchmark's phases against one running engine, each measured the same way for every
engine: ``warmup`` (the first records through a cold engine), ``max`` (a backlog written
while the engine is warm, sized to take several seconds of checkpoints), and the paced
phases (``sustained``, ``near_max``: a rate for a time, latency and whether it kept up).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from typing import Any

from bench.kafka_latency.job_gauges import CommitLatencyGauges
from bench.kafka_latency.load import (
    LatencyConsumer,
    PacedProducer,
    tree_cpu_seconds,
    write_backlog,
)


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) of ``values``, None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


def _alive(proc: subprocess.Popen[bytes]) -> Any:
    return lambda: proc.poll() is None


def warmup_phase(
    args: argparse.Namespace, consumer: LatencyConsumer, proc: subprocess.Popen[bytes]
) -> dict[str, Any]:
    """Wait until the ``--warmup`` records written before the start are all out: the time to
    the first output (start-up, first checkpoint) and to the last."""
    t_start = time.time()
    if not consumer.wait_for(1, args.start_timeout, _alive(proc)):
        alive = proc.poll() is None
        return {"error": "no output" if alive else f"engine exited {proc.returncode}"}
    first = time.time() - t_start
    done = consumer.wait_for(args.warmup, args.start_timeout, _alive(proc))
    out = {"first_output_s": round(first, 1), "all_out_s": round(time.time() - t_start, 1)}
    if not done:
        out["error"] = f"{consumer.count} of the {args.warmup} warm-up records out"
    return out


def _backlog_round(
    args: argparse.Namespace,
    topic: str,
    size: int,
    seed: int,
    consumer: LatencyConsumer,
    proc: subprocess.Popen[bytes],
) -> tuple[dict[str, Any], int]:
    """Write ``size`` records at once and time them through the engine: from the start of the
    writing until the last is read (or ``--drain-seconds``, then the count read so far); the
    row and the consumer count at which the whole round is out."""
    base = consumer.count
    cpu0 = tree_cpu_seconds(proc.pid)
    t0 = time.time()
    write_s = write_backlog(args.client, topic, size, args.keys, seed=seed)
    left = max(1.0, args.drain_seconds - (time.time() - t0))
    drained = consumer.wait_for(base + size, left, _alive(proc))
    t1 = time.time()
    out = consumer.count - base
    cpu = tree_cpu_seconds(proc.pid) - cpu0
    return {
        "records": size,
        "out": out,
        "seconds": round(t1 - t0, 1),
        "write_s": round(write_s, 1),
        "records_per_s": round(out / (t1 - t0)),
        "cpu_s_per_M": round(cpu / max(1, out) * 1e6, 1),
        "drained": drained,
    }, base + size


def next_round(size: int, row: dict[str, Any], max_seconds: float, cap: int) -> int | None:
    """The next ``max`` round's size after ``row`` (a round of ``size`` records), None when
    ``row`` is the measure: it lasted half of ``max_seconds``, fell behind, or had ``cap``."""
    if not row["drained"] or row["seconds"] >= max_seconds / 2 or size >= cap:
        return None
    return min(cap, max(2 * size, int(row["records_per_s"] * max_seconds)))


def max_phase(
    args: argparse.Namespace, topic: str, consumer: LatencyConsumer, proc: subprocess.Popen[bytes]
) -> dict[str, Any]:
    """The engine's throughput over a backlog written while it is warm. Rounds grow until one
    takes at least half of ``--max-seconds`` (many checkpoints, so no single transaction or
    micro-batch is the measure); that size then runs ``--max-repeats`` times in all and the
    median round is the figure (``measures``: every such round's records/s; the first is
    what a single round gives), the earlier rounds the sizing."""
    size = args.max_first
    rounds: list[dict[str, Any]] = []
    target = 0
    for i in range(args.max_rounds):
        r, target = _backlog_round(args, topic, size, i + 2, consumer, proc)
        rounds.append(r)
        if proc.poll() is not None:
            return {"error": f"engine exited {proc.returncode}", "rounds": rounds}
        nxt = next_round(size, r, args.max_seconds, args.backlog)
        if nxt is None:
            break
        size = nxt
    measures = [rounds[-1]]
    while len(measures) < args.max_repeats and measures[-1]["drained"]:
        r, target = _backlog_round(args, topic, size, len(rounds) + 2, consumer, proc)
        rounds.append(r)
        measures.append(r)
        if proc.poll() is not None:
            return {"error": f"engine exited {proc.returncode}", "rounds": rounds}
    last = measures[-1]
    median = sorted(measures, key=lambda m: m["records_per_s"])[(len(measures) - 1) // 2]
    result = {k: median[k] for k in ("records", "out", "seconds", "records_per_s", "cpu_s_per_M")}
    result["writer_bound"] = median["write_s"] > 0.8 * median["seconds"]
    result["measures"] = [m["records_per_s"] for m in measures]
    result["rounds"] = rounds
    if not last["drained"]:
        # What is left of the backlog must be out before a paced phase measures latency.
        behind = last["records"] - last["out"]
        wait = min(args.drain_seconds, behind / max(1, last["records_per_s"]) * 1.5)
        result["rest_out"] = consumer.wait_for(target, wait, _alive(proc))
    return result


def paced_phase(
    args: argparse.Namespace,
    topic: str,
    rate: int,
    consumer: LatencyConsumer,
    proc: subprocess.Popen[bytes],
    expected: int,
    gauges: CommitLatencyGauges | None = None,
) -> dict[str, Any]:
    """``rate`` records/s for ``--seconds``: latency, CPU, and whether every record was out
    within ``--catch-up-seconds`` of the phase's end (``sustained``; ``expected`` is what
    the earlier phases wrote, all of it out before this one started); with ``gauges``, the
    job's own latency gauges over the same window (``gauge_*``)."""
    before = consumer.count
    cpu0 = tree_cpu_seconds(proc.pid)
    producer = PacedProducer(args.client, topic, rate, args.seconds, args.keys)
    sent = producer.join()
    t_end = time.time()
    caught_up = consumer.wait_for(expected + sent, args.catch_up_seconds, _alive(proc))
    cpu1 = tree_cpu_seconds(proc.pid)
    lo = producer.start * 1000 + args.settle * 1000
    lat = consumer.latencies_ms(lo, t_end * 1000)
    out = consumer.count - before
    return {
        "rate": rate,
        "sent": sent,
        "received": out,
        "sustained": caught_up,
        "records_per_s": round(sent / args.seconds),
        "latency_ms_p50": percentile(lat, 0.5),
        "latency_ms_p99": percentile(lat, 0.99),
        "latency_ms_mean": round(statistics.fmean(lat), 1) if lat else None,
        "latency_samples": len(lat),
        "cpu_s_per_M": round((cpu1 - cpu0) / max(1, out) * 1e6, 1),
        **(gauges.window(lo / 1000, time.time()) if gauges is not None else {}),
    }
