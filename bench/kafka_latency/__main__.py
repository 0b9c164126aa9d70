"""Kafka -> parse -> keyed count (1M keys) -> Kafka, exactly-once, checkpoints every second:
end-to-end latency, throughput and CPU of sparkpoint, Spark Structured Streaming (and its
real-time mode) and PyFlink, on one broker in one run (``python -m bench.kafka_latency``).

Each engine runs alone, on its own 8-partition input topic, in three phases:

1. ``max``: a backlog of ``--backlog`` records is written before the engine starts; its
   throughput is the output rate between 10% and 90% of the backlog (or ``--drain-seconds``);
2. ``sustained``: ``--rate`` records/s for ``--seconds`` (the same for every engine);
3. ``near_max``: ``--near-max`` times the engine's own ``max`` throughput for ``--seconds``.

Latency is a ``read_committed`` consumer's receive time minus the producer's stamp in the
record (records stamped in the phase after its first ``--settle`` seconds); CPU is the
engine's process tree's (``/proc``), per million records of the phase. One JSON line per
engine and phase, then a ``table`` line. The baseline is the other engines in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from bench.kafka_latency.load import (
    LatencyConsumer,
    PacedProducer,
    tree_cpu_seconds,
    tree_pids,
    write_backlog,
)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ENGINES = ["sparkpoint", "spark", "spark-rtm", "pyflink"]
FLINK_KAFKA = "org.apache.flink:flink-sql-connector-kafka:5.0.0-2.2"


def emit(record: dict[str, Any]) -> None:
    """Print ``record`` as one JSON line (flushed: a long run shows its progress)."""
    print(json.dumps(record), flush=True)


def engine_command(
    engine: str, args: argparse.Namespace, topics: tuple[str, str], work: str
) -> list[str]:
    """The command line that runs ``engine``'s job on ``topics`` (input, output)."""
    common = ["--bootstrap", args.bootstrap, "--source", topics[0], "--sink", topics[1]]
    common += ["--checkpoints", os.path.join(work, "checkpoints")]
    if engine == "sparkpoint":
        script = os.path.join(HERE, "datastream_job.py")
        return [sys.executable, script, "--api", "sparkpoint", *common]
    if engine == "pyflink":
        from tests.fixtures.system import maven_artifacts

        jar = str(maven_artifacts([FLINK_KAFKA])[0])
        script = os.path.join(HERE, "datastream_job.py")
        return [args.pyflink_python, script, "--api", "pyflink", "--jar", jar, *common]
    from tests.fixtures.system import spark_kafka_jars

    jars = ",".join(str(j) for j in spark_kafka_jars())
    rtm = ["--real-time"] if engine == "spark-rtm" else []
    return [sys.executable, os.path.join(HERE, "spark_job.py"), "--jars", jars, *common, *rtm]


def stop_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the engine's process tree, SIGKILL what is left after 10 s."""
    pids = tree_pids(proc.pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        pids = [p for p in pids if os.path.exists(f"/proc/{p}")]
        if not pids:
            return
        time.sleep(1)


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) of ``values``, None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


def drain_phase(
    args: argparse.Namespace, consumer: LatencyConsumer, proc: subprocess.Popen[bytes]
) -> dict[str, Any]:
    """The backlog phase: output rate and CPU between 10% and 90% of the backlog."""
    alive = lambda: proc.poll() is None  # noqa: E731
    t_start = time.time()
    if not consumer.wait_for(args.backlog // 10, args.start_timeout, alive):
        return {"error": "no output" if alive() else f"engine exited {proc.returncode}"}
    t0, c0, cpu0 = time.time(), consumer.count, tree_cpu_seconds(proc.pid)
    deadline = t0 + args.drain_seconds
    while consumer.count < args.backlog * 9 // 10 and time.time() < deadline and alive():
        time.sleep(0.05)
    t1, c1, cpu1 = time.time(), consumer.count, tree_cpu_seconds(proc.pid)
    # The rest of the backlog must be out before the paced phases start.
    drained = consumer.wait_for(args.backlog, args.drain_seconds * 3, alive)
    rate = (c1 - c0) / (t1 - t0)
    return {
        "first_output_s": round(t0 - t_start, 1),
        "records": c1 - c0,
        "seconds": round(t1 - t0, 1),
        "records_per_s": round(rate),
        "cpu_s_per_M": round((cpu1 - cpu0) / max(1, c1 - c0) * 1e6, 1),
        "backlog_drained": drained,
        "outputs_after_drain": consumer.count,
    }


def paced_phase(
    args: argparse.Namespace,
    topic: str,
    rate: int,
    consumer: LatencyConsumer,
    proc: subprocess.Popen[bytes],
) -> dict[str, Any]:
    """``rate`` records/s for ``args.seconds``: latency, CPU, and whether all came out."""
    before = consumer.count
    cpu0 = tree_cpu_seconds(proc.pid)
    producer = PacedProducer(args.bootstrap, topic, rate, args.seconds, args.keys)
    sent = producer.join()
    t_end = time.time()
    caught_up = consumer.wait_for(before + sent, args.catch_up_seconds, lambda: proc.poll() is None)
    cpu1 = tree_cpu_seconds(proc.pid)
    lo = producer.start * 1000 + args.settle * 1000
    lat = consumer.latencies_ms(lo, t_end * 1000)
    out = consumer.count - before
    return {
        "rate": rate,
        "sent": sent,
        "received": out,
        "caught_up_within_s": args.catch_up_seconds if caught_up else None,
        "records_per_s": round(sent / args.seconds),
        "latency_ms_p50": percentile(lat, 0.5),
        "latency_ms_p99": percentile(lat, 0.99),
        "latency_ms_mean": round(statistics.fmean(lat), 1) if lat else None,
        "latency_samples": len(lat),
        "cpu_s_per_M": round((cpu1 - cpu0) / max(1, out) * 1e6, 1),
    }


def run_engine(engine: str, args: argparse.Namespace, broker: Any, work: str) -> list[dict]:
    """One engine's three phases, its process tree stopped at the end."""
    topics = (f"{engine}-in", f"{engine}-out")
    for topic in topics:
        broker.create_topic(topic, args.partitions)
    backlog_s = write_backlog(args.bootstrap, topics[0], args.backlog, args.keys)
    engine_work = os.path.join(work, engine)
    os.makedirs(engine_work)
    consumer = LatencyConsumer(args.bootstrap, topics[1])
    log_path = os.path.join(work, f"{engine}.log")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH", "")) if p)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            engine_command(engine, args, topics, engine_work),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=engine_work,
        )
    results: list[dict] = []
    try:
        drain = drain_phase(args, consumer, proc)
        results.append(
            {"engine": engine, "phase": "max", "backlog_write_s": round(backlog_s, 1), **drain}
        )
        emit(results[-1])
        if "error" in drain:
            return results
        rates = [("sustained", args.rate)]
        if args.near_max > 0:
            rates.append(("near_max", int(drain["records_per_s"] * args.near_max)))
        for phase, rate in rates:
            if proc.poll() is not None:
                break
            results.append(
                {
                    "engine": engine,
                    "phase": phase,
                    **paced_phase(args, topics[0], rate, consumer, proc),
                }
            )
            emit(results[-1])
    finally:
        stop_tree(proc)
        consumer.stop()
        failed = any("error" in r for r in results)
        if failed or proc.returncode not in (0, -signal.SIGTERM, -signal.SIGKILL, 143):
            with open(log_path, "rb") as f:
                tail = f.read()[-2000:].decode(errors="replace")
            emit({"engine": engine, "log_tail": tail})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=ENGINES)
    parser.add_argument("--backlog", type=int, default=2_000_000)
    parser.add_argument("--rate", type=int, default=5000, help="sustained phase, records/s")
    parser.add_argument("--near-max", type=float, default=0.8)
    parser.add_argument("--seconds", type=float, default=45)
    parser.add_argument("--settle", type=float, default=10)
    parser.add_argument("--drain-seconds", type=float, default=45)
    parser.add_argument("--catch-up-seconds", type=float, default=20)
    parser.add_argument("--start-timeout", type=float, default=180)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--pyflink-python", default="/tmp/pyflink-venv/bin/python")
    args = parser.parse_args()

    from tests.fixtures.kafka import KafkaBroker

    work = tempfile.mkdtemp(prefix="kafka-latency-")
    broker = KafkaBroker()
    t0 = time.time()
    try:
        broker.start()
        args.bootstrap = broker.bootstrap_servers
        emit({"run": "start", "args": {k: v for k, v in vars(args).items()}})
        rows = []
        for engine in args.engines:
            rows += run_engine(engine, args, broker, work)
        emit({"table": rows, "seconds": round(time.time() - t0)})
    finally:
        broker.stop()
        if os.environ.get("KAFKA_LATENCY_KEEP") is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work dir kept: {work}", file=sys.stderr)


if __name__ == "__main__":
    main()
