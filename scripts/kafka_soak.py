"""Unbounded Kafka soak (issue 30's "30-minute unbounded run"): steady input for
``--minutes``, then stop-with-savepoint, exact output, flat memory, a clean checkpoint dir.

A producer writes ``--rate`` records per second into an 8-partition topic; the job reads it
unbounded: Kafka → keyed count (``--keys`` keys) → Kafka EXACTLY_ONCE, checkpoints every
``--interval-ms`` with ``--retained`` retained. Every ``--sample-s`` seconds one JSON line
gives the driver's, the JVM's and the Python workers' RSS, CPU, records read, the consumer
lag, epochs, checkpoints, and an audit of the job's checkpoint directory (files that no
retained checkpoint references, outside an in-progress ``chk-N`` and ``taskowned/``, and
referenced files that are missing; one checkpoint more than retained is audited again, as
the directory holds one between a new checkpoint's ``_metadata`` and the deletion of the
one it subsumes). At the end the producer stops, the job stops with a savepoint, and a
second job restores it and reads the rest until a checkpoint covers it, so that a
``read_committed`` consumer must see every record's count exactly once: none lost or
doubled across the stop. Memory is flat when the mean of each role in the last window
(five minutes, or a third of a shorter run) is at most 10% above the first window's (a
leak grows; a live heap that falls is reported, not failed); the first window starts after
``--warm-up-s`` (60 s: the JVM's heap grows while Spark warms up). The roles: the driver's
and the Python workers' RSS, and the JVM's live heap (used after a full collection,
``jcmd GC.run`` then ``GC.heap_info``, once a minute); the JVM's RSS is reported beside
it, but it grows as the heap expands toward ``-Xmx`` and is not returned.
Prints a verdict line; exits 1 if a check failed.

Usage: ``python scripts/kafka_soak.py [--minutes 30] [--rate 2000] [--dir DIR]``
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.kafka_unbounded import (
    ProcessTree,
    SteadyProducer,
    expected_counts,
    keyed_count_job,
    read_committed,
)
from sparkpoint.checkpoint.audit import audit_checkpoint_directory

PARTITIONS = 8
TOPIC_IN, TOPIC_OUT, PREFIX = "soak-in", "soak-out", "soak"
_ROLES = ("driver_rss", "jvm_rss", "workers_rss", "jvm_live_heap")
# What can leak in the JVM is its live heap; its RSS also grows as the heap expands toward
# -Xmx and does not shrink, so the verdict reads the live heap and reports the RSS.
_VERDICT_ROLES = ("driver_rss", "workers_rss", "jvm_live_heap")
_HEAP_EVERY_S = 60.0


def _jvm_live_heap(pids: list[int]) -> int | None:
    """Bytes of the JVMs' heaps in use right after a full collection (``jcmd GC.run``,
    then ``GC.heap_info``): their live objects. None without ``jcmd`` or a JVM."""
    jcmd = shutil.which("jcmd") or os.path.join(os.environ.get("JAVA_HOME", ""), "bin", "jcmd")
    if not pids or not os.path.exists(jcmd):
        return None
    used = 0
    for pid in pids:
        subprocess.run([jcmd, str(pid), "GC.run"], capture_output=True, timeout=60, check=True)
        info = subprocess.run(
            [jcmd, str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=60
        ).stdout
        # " garbage-first heap   total 262144K, used 123456K [0x..."
        kib = info.split(" used ", 1)[1].split("K", 1)[0]
        used += int(kib) * 1024
    return used


def _env(args: argparse.Namespace, work: str, spark: Any, restore: str | None = None) -> Any:
    from sparkpoint.common import Configuration
    from sparkpoint.datastream import (
        ExternalizedCheckpointRetention,
        FileSystemCheckpointStorage,
        StreamExecutionEnvironment,
    )

    conf = Configuration()
    conf.set_string("sparkpoint.local-state.dir", os.path.join(work, "local"))
    conf.set_string("execution.checkpointing.num-retained", str(args.retained))
    if restore is not None:
        conf.set_string("execution.savepoint.path", restore)
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(args.parallelism)
    env.enable_checkpointing(args.interval_ms)
    config = env.get_checkpoint_config()
    config.set_checkpoint_storage(
        FileSystemCheckpointStorage(
            f"file://{work}/ckpt", savepoint_path=f"file://{work}/savepoints"
        )
    )
    config.set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    )
    return env


def _audit(job_dir: str, retained: int) -> dict[str, int]:
    """Unreferenced files outside in-flight places, missing referenced files, and how many
    complete checkpoints there are. Listing races the job: a checkpoint subsumed between
    listing and reading looks missing, and one whose successor's ``_metadata`` is written
    but not yet followed by its deletion looks retained one too many (up to three tries)."""
    result: dict[str, int] = {}
    for _attempt in range(3):
        audit = audit_checkpoint_directory(job_dir)
        done = {f"/chk-{i}/" for i in audit.checkpoint_ids}
        in_flight = [
            f
            for f in audit.unreferenced
            if "/taskowned/" in f or ("/chk-" in f and not any(d in f for d in done))
        ]
        result = {
            "retained": len(audit.checkpoint_ids),
            "files": len(audit.files),
            "leaked": len(audit.unreferenced) - len(in_flight),
            "in_flight": len(in_flight),
            "missing": len(audit.missing),
        }
        if result["leaked"] == 0 and result["missing"] == 0 and result["retained"] <= retained:
            break
        time.sleep(0.5)
    return result


def _sample(
    client: Any, tree: ProcessTree, t0: float, job_dir: str, heap: bool, retained: int
) -> dict[str, Any]:
    usage = tree.usage()
    progress = client.job_master.progress
    lag = progress.consumer_lag()
    stats = client.get_checkpoint_statistics()
    return {
        "t_s": round(time.monotonic() - t0, 1),
        "driver_rss": usage.driver_rss,
        "jvm_rss": usage.jvm_rss,
        "workers_rss": usage.workers_rss,
        "cpu_s": round(usage.cpu_s, 1),
        "records_in": progress.records_in,
        "lag": sum(n for by in lag.values() for n in by.values()),
        "epochs": progress.epochs_run,
        "checkpoints_completed": sum(1 for s in stats if s.status == "COMPLETED"),
        "checkpoints_failed": sum(1 for s in stats if s.status == "FAILED"),
        "audit": _audit(job_dir, retained),
        **({"jvm_live_heap": _jvm_live_heap(tree.java_pids())} if heap else {}),
    }


def _wait_until_covered(client: Any, records: int, timeout: float = 300.0) -> None:
    """Wait until the job read ``records`` records and a completed checkpoint covers them
    (its sink committed them)."""
    deadline = time.monotonic() + timeout
    while True:
        if client.get_job_execution_result().done():
            client.wait()  # raises the job's failure
        reports = client.get_epoch_reports()
        last_data = max((r.epoch for r in reports if r.records_in), default=0)
        stats = client.get_checkpoint_statistics()
        done = [s.epoch for s in stats if s.status == "COMPLETED"]
        read = client.job_master.progress.records_in
        # Nothing read after the restore: the savepoint already covers everything.
        if read >= records and (last_data == 0 or (done and max(done) >= last_data)):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the restored job read {read} of {records} records")
        time.sleep(0.2)


def _memory_flat(
    samples: list[dict[str, Any]], window_s: float, warm_up_s: float
) -> dict[str, Any]:
    """Mean memory per role in the first window after the warm-up and in the last window, and
    whether each grew by at most 10% (a leak grows; a collected heap may shrink)."""
    end = samples[-1]["t_s"]
    first = [s for s in samples if warm_up_s <= s["t_s"] <= warm_up_s + window_s]
    last = [s for s in samples if s["t_s"] >= end - window_s]
    out: dict[str, Any] = {"window_s": window_s, "warm_up_s": warm_up_s}
    for role in _ROLES:
        a_values = [s[role] for s in first if s.get(role) is not None]
        b_values = [s[role] for s in last if s.get(role) is not None]
        if not a_values or not b_values:
            continue  # no jcmd: no live heap
        a, b = statistics.fmean(a_values), statistics.fmean(b_values)
        out[role] = {"first_mib": round(a / 2**20, 1), "last_mib": round(b / 2**20, 1)}
        out[role]["flat"] = b <= 1.10 * a
    out["flat"] = all(out[r]["flat"] for r in _VERDICT_ROLES if r in out)
    return out


def _run(args: argparse.Namespace, broker: Any, spark: Any, work: str) -> dict[str, Any]:
    broker.create_topic(TOPIC_IN, PARTITIONS)
    broker.create_topic(TOPIC_OUT, PARTITIONS)
    producer = SteadyProducer(broker.bootstrap_servers, TOPIC_IN, args.rate, PARTITIONS, args.keys)
    env = _env(args, work, spark)
    keyed_count_job(env, broker.bootstrap_servers, TOPIC_IN, TOPIC_OUT, PREFIX)
    tree = ProcessTree(exclude=(broker.process.pid,))
    producer.start()
    client = env.execute_async("kafka-soak")
    job_dir = os.path.join(work, "ckpt", client.get_job_id())
    t0 = time.monotonic()
    samples: list[dict[str, Any]] = []
    try:
        while time.monotonic() - t0 < args.minutes * 60:
            time.sleep(args.sample_s)
            if client.get_job_execution_result().done():
                client.wait()  # raises the job's failure
            last_heap = max((s["t_s"] for s in samples if "jvm_live_heap" in s), default=-1e9)
            heap = time.monotonic() - t0 - last_heap >= _HEAP_EVERY_S
            samples.append(_sample(client, tree, t0, job_dir, heap, args.retained))
            print(json.dumps({"sample": samples[-1]}), flush=True)
    finally:
        produced = producer.stop()
    t_stop = time.monotonic()
    savepoint = client.stop_with_savepoint(False).result(timeout=300)
    client.wait(timeout=300)
    stop_s = time.monotonic() - t_stop
    first_job = client.job_master.progress.records_in

    env = _env(args, work, spark, restore=str(savepoint))
    keyed_count_job(env, broker.bootstrap_servers, TOPIC_IN, TOPIC_OUT, PREFIX)
    t_rest = time.monotonic()
    rest = env.execute_async("kafka-soak-rest")
    try:
        _wait_until_covered(rest, produced - first_job)
    finally:
        rest.cancel()
        rest.wait(timeout=300)
    rest_s = time.monotonic() - t_rest
    rest_read = rest.job_master.progress.records_in
    got = collections.Counter(read_committed(broker.bootstrap_servers, TOPIC_OUT))
    expected = expected_counts(produced, args.keys)
    audits = [s["audit"] for s in samples]
    window = min(300.0, (args.minutes * 60 - args.warm_up_s) / 3)
    memory = _memory_flat(samples, window, args.warm_up_s)
    checks = {
        "output_exact": got == expected,
        "all_read": first_job + rest_read == produced,
        "memory_flat": memory["flat"],
        "checkpoint_dir_clean": all(a["leaked"] == 0 and a["missing"] == 0 for a in audits),
        "retained_at_most": max(a["retained"] for a in audits) <= args.retained,
        "stop_within_30_s": stop_s < 30,
    }
    return {
        "verdict": "PASS" if all(checks.values()) else "FAIL",
        "checks": checks,
        "minutes": args.minutes,
        "rate": args.rate,
        "produced": produced,
        "output_records": sum(got.values()),
        "expected_records": sum(expected.values()),
        "read_before_stop": first_job,
        "read_after_restore": rest_read,
        "stop_with_savepoint_s": round(stop_s, 2),
        "restore_to_end_s": round(rest_s, 2),
        "epochs": client.job_master.progress.epochs_run,
        "checkpoints_completed": samples[-1]["checkpoints_completed"] if samples else 0,
        "max_lag": max((s["lag"] for s in samples), default=0),
        "memory": memory,
        "cpu_s_per_min": round(
            (samples[-1]["cpu_s"] - samples[0]["cpu_s"])
            / max(samples[-1]["t_s"] - samples[0]["t_s"], 1e-9)
            * 60,
            1,
        ),
    }


def main(argv: list[str] | None = None) -> int:
    """Start a broker and Spark, run the soak, print the verdict; 1 if a check failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=int, default=2000, help="records per second")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--interval-ms", type=int, default=1000, help="checkpoint interval")
    parser.add_argument("--retained", type=int, default=3)
    parser.add_argument("--sample-s", type=float, default=10.0)
    parser.add_argument(
        "--warm-up-s",
        type=float,
        default=60.0,
        help="left out of the first memory window (the JVM's heap and JIT grow at first)",
    )
    parser.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from sparkpoint.runtime.spark.session import get_spark_session
    from tests.fixtures.kafka import KafkaBroker

    work = args.dir or tempfile.mkdtemp(prefix="kafka-soak-")
    broker = KafkaBroker()
    broker.start()
    try:
        spark = get_spark_session("local[2,4]")
        try:
            result = _run(args, broker, spark, work)
        finally:
            spark.stop()
    finally:
        broker.stop()
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result), flush=True)
    return 0 if result["verdict"] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
