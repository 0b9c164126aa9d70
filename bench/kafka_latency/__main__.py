"""Kafka -> parse -> keyed count (1M keys) -> Kafka, exactly-once, checkpoints every second:
end-to-end latency, throughput and CPU of sparkpoint (``sparkpoint``: the default epoch mode,
``auto``, long-running tasks for a job alone in its application; ``sparkpoint-lr``:
``sparkpoint.epoch.mode=long-running``; ``sparkpoint-job``: ``job``, a Spark job per epoch), Spark
Structured Streaming (and its real-time mode) and PyFlink (thread and process mode), on one
broker in one run (``python -m bench.kafka_latency``; ``--markdown run.jsonl`` prints a
run's table).

Each engine runs alone, on its own 8-partition input topic, in the same phases:

1. ``warmup``: ``--warmup`` records written before the engine starts, all read out;
2. ``max``: a backlog written while the engine runs warm; its throughput is its records
   over the time from the start of the writing until the last is read. Rounds grow from
   ``--max-first`` records until one lasts half of ``--max-seconds`` (many checkpoints);
   that size runs ``--max-repeats`` (3) times and the median round is the figure (one
   round's throughput moved by ±20% between runs on the 2-core machine);
3. ``sustained``: ``--rate`` records/s for ``--seconds`` (the same for every engine);
   ``sustained`` is false when not every record is out ``--catch-up-seconds`` after it;
4. ``near_max``: ``--near-max`` times the engine's own ``max`` throughput for ``--seconds``.

Latency is a ``read_committed`` consumer's receive time minus the producer's stamp in the
record (records stamped in the phase after its first ``--settle`` seconds); CPU is the
engine's process tree's (``/proc``), per million records of the phase. One JSON line per
engine and phase, then a ``table`` line. The baseline is the other engines in the same run.

``--protocols PLAINTEXT SASL_SSL`` runs the engines against a PLAINTEXT broker, then against
a SASL_SSL one (``tests.fixtures.kafka_secured``: SCRAM-SHA-512, TLS, ACLs enforced, the job
as a principal with only the ACLs it needs, configured by Java's property names), and ends
with a ``protocol_cost`` line: each engine's ``max`` throughput over both and their ratio.
``--max-only`` stops each engine after its ``max`` phase. Spark's jobs take no security
settings here: over SASL_SSL they are not run.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from bench.kafka_latency.job_gauges import CommitLatencyGauges, free_port
from bench.kafka_latency.load import LatencyConsumer, tree_pids, write_backlog
from bench.kafka_latency.phases import max_phase, paced_phase, percentile, warmup_phase
from bench.kafka_latency.report import read_json_lines, table

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# engine -> (label in the table, delivery guarantee of its Kafka sink)
ENGINES = {
    "sparkpoint": ("sparkpoint", "exactly-once"),
    "sparkpoint-lr": ("sparkpoint, long-running epochs", "exactly-once"),
    "sparkpoint-job": ("sparkpoint, a Spark job per epoch", "exactly-once"),
    "spark": ("Spark SS (`applyInPandasWithState`)", "at-least-once"),
    "spark-rtm": ("Spark SS real-time mode", "at-least-once"),
    "pyflink": ("PyFlink 2.3, thread mode", "exactly-once"),
    "pyflink-process": ("PyFlink 2.3, process mode", "exactly-once"),
}
FLINK_KAFKA = "org.apache.flink:flink-sql-connector-kafka:5.0.0-2.2"


def emit(record: dict[str, Any]) -> None:
    """Print ``record`` as one JSON line (flushed: a long run shows its progress)."""
    print(json.dumps(record), flush=True)


def engine_command(
    engine: str,
    args: argparse.Namespace,
    topics: tuple[str, str],
    work: str,
    rest_port: int | None = None,
) -> list[str]:
    """The command line that runs ``engine``'s job on ``topics`` (input, output); a
    sparkpoint job serves its REST API on ``rest_port`` if given."""
    common = ["--bootstrap", args.bootstrap, "--source", topics[0], "--sink", topics[1]]
    common += ["--checkpoints", os.path.join(work, "checkpoints")]
    common += ["--checkpoint-interval-ms", str(args.checkpoint_interval_ms)]
    common += ["--guarantee", args.guarantee]
    properties = getattr(args, "properties", {})
    if properties and engine in ("spark", "spark-rtm"):
        raise ValueError(f"{engine} takes no Kafka security settings in this benchmark")
    common += [x for k, v in properties.items() for x in ("--property", f"{k}={v}")]
    script = os.path.join(HERE, "datastream_job.py")
    if engine.startswith("sparkpoint"):
        settings = list(args.sparkpoint_conf)
        modes = {"sparkpoint-lr": "long-running", "sparkpoint-job": "job"}
        if engine in modes:
            settings.insert(0, f"sparkpoint.epoch.mode={modes[engine]}")
        if rest_port is not None:
            settings += [
                "sparkpoint.rest.enabled=true",
                f"sparkpoint.dashboard.port={rest_port}",
                f"sparkpoint.rest.jobs-dir={os.path.join(work, 'jobs')}",
            ]
        conf = [x for item in settings for x in ("--conf", item)]
        return [sys.executable, script, "--api", "sparkpoint", *conf, *common]
    if engine.startswith("pyflink"):
        from tests.fixtures.system import maven_artifacts

        if not os.access(args.pyflink_python, os.X_OK):
            venv = os.path.dirname(os.path.dirname(args.pyflink_python))
            raise FileNotFoundError(
                f"no PyFlink interpreter at {args.pyflink_python} (--pyflink-python): make one "
                f"with `python -m venv {venv} && {venv}/bin/pip install apache-flink==2.3.0`"
            )

        jar = str(maven_artifacts([FLINK_KAFKA])[0])
        mode = "process" if engine == "pyflink-process" else "thread"
        conf = [x for item in args.pyflink_conf for x in ("--conf", item)]
        return [
            args.pyflink_python,
            script,
            "--api",
            "pyflink",
            "--jar",
            jar,
            "--pyflink-mode",
            mode,
            *conf,
            *common,
        ]
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


_FLINK_CHECKPOINT = re.compile(
    r"Completed checkpoint (\d+) for job \S+ \((\d+) bytes(?:, checkpointDuration=| in )(\d+) ms"
)


def flink_checkpoints(log_dir: str) -> dict[str, Any]:
    """Count, size and duration of the checkpoints a PyFlink run's log reports as completed."""
    durations, sizes = [], []
    for path in glob.glob(os.path.join(log_dir, "*.log")):
        with open(path, errors="replace") as f:
            for line in f:
                m = _FLINK_CHECKPOINT.search(line)
                if m:
                    sizes.append(int(m.group(2)))
                    durations.append(float(m.group(3)))
    return {
        "checkpoints": len(durations),
        "checkpoint_ms_p50": percentile(durations, 0.5),
        "checkpoint_ms_max": max(durations, default=None),
        "checkpoint_bytes_max": max(sizes, default=None),
    }


def _phases(
    engine: str,
    args: argparse.Namespace,
    topic: str,
    consumer: LatencyConsumer,
    proc: subprocess.Popen[bytes],
    gauges: CommitLatencyGauges | None = None,
) -> list[dict[str, Any]]:
    """The engine's phases in order, each emitted as it ends; stops at the first error."""
    label, guarantee = ENGINES[engine]
    if guarantee == "exactly-once":  # the engines whose sink takes --guarantee
        guarantee = args.guarantee.lower().replace("_", "-")
    tag = {"engine": engine, "label": label, "guarantee": guarantee}
    if args.protocol != "PLAINTEXT":
        tag["protocol"] = args.protocol
    results = [{**tag, "phase": "warmup", **warmup_phase(args, consumer, proc)}]
    emit(results[-1])
    if "error" in results[-1]:
        return results
    results.append({**tag, "phase": "max", **max_phase(args, topic, consumer, proc)})
    emit(results[-1])
    if "error" in results[-1] or args.max_only:
        return results
    # Every record written so far: a paced phase starts once they are all out.
    expected = args.warmup + sum(r["records"] for r in results[-1]["rounds"])
    rates = [("sustained", args.rate)]
    if args.near_max > 0:
        rates.append(("near_max", int(results[-1]["records_per_s"] * args.near_max)))
    for phase, rate in rates:
        if proc.poll() is not None:
            break
        if not consumer.wait_for(expected, args.catch_up_seconds, lambda: proc.poll() is None):
            behind = expected - consumer.count
            error = f"not run: {behind:,} records of the earlier phases not out yet"
            results.append({**tag, "phase": phase, "rate": rate, "error": error})
            emit(results[-1])
            break
        row = paced_phase(args, topic, rate, consumer, proc, expected, gauges)
        expected += row["sent"]
        results.append({**tag, "phase": phase, **row})
        emit(results[-1])
    return results


def run_engine(engine: str, args: argparse.Namespace, broker: Any, work: str) -> list[dict]:
    """One engine's phases, its process tree stopped at the end."""
    topics = (f"{engine}-in", f"{engine}-out")
    for topic in topics:
        broker.create_topic(topic, args.partitions)
    if args.protocol != "PLAINTEXT":
        broker.grant(job_acls(engine, topics))
    write_backlog(args.client, topics[0], args.warmup, args.keys)
    engine_work = os.path.join(work, args.protocol, engine)
    os.makedirs(engine_work)
    consumer = LatencyConsumer(args.client, topics[1])
    log_path = os.path.join(work, f"{engine}-{args.protocol}.log")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH", "")) if p)
    flink_logs = os.path.join(engine_work, "flink-log")
    os.makedirs(flink_logs)
    env["FLINK_LOG_DIR"] = flink_logs
    results: list[dict] = []
    rest_port = free_port() if engine.startswith("sparkpoint") else None
    gauges = None
    with open(log_path, "wb") as log:
        try:
            command = engine_command(engine, args, topics, engine_work, rest_port)
        except BaseException as exc:  # a missing jar or interpreter: this engine only
            row = {"engine": engine, "phase": "warmup", "error": repr(exc)[:300]}
            if args.protocol != "PLAINTEXT":
                row["protocol"] = args.protocol
            results.append(row)
            emit(results[-1])
            consumer.stop()
            return results
        proc = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=engine_work,
        )
    if rest_port is not None:
        gauges = CommitLatencyGauges(f"http://127.0.0.1:{rest_port}")
    try:
        results = _phases(engine, args, topics[0], consumer, proc, gauges)
    finally:
        if gauges is not None:
            gauges.stop()
        stop_tree(proc)
        consumer.stop()
        if engine.startswith("pyflink"):
            emit({"engine": engine, "flink_log": flink_checkpoints(flink_logs)})
        failed = any("error" in r for r in results)
        if failed or proc.returncode not in (0, -signal.SIGTERM, -signal.SIGKILL, 143):
            with open(log_path, "rb") as f:
                tail = f.read()[-2000:].decode(errors="replace")
            emit({"engine": engine, "log_tail": tail})
    return results


def job_acls(engine: str, topics: tuple[str, str]) -> list[tuple[str, str, str, str]]:
    """What the job's principal may do on a secured broker: read the input and its group,
    write the output transactionally (docs/kafka-source.md, docs/kafka-sink.md)."""
    api = "sparkpoint" if engine.startswith("sparkpoint") else "pyflink"
    return [
        ("TOPIC", topics[0], "LITERAL", "READ"),
        ("TOPIC", topics[0], "LITERAL", "DESCRIBE"),
        ("GROUP", f"{api}-bench", "LITERAL", "READ"),
        ("TOPIC", topics[1], "LITERAL", "WRITE"),
        ("TOPIC", topics[1], "LITERAL", "DESCRIBE"),
        ("TOPIC", topics[1], "LITERAL", "READ"),  # DescribeProducers: the hanging check
        ("TRANSACTIONAL_ID", f"{api}-bench", "PREFIXED", "WRITE"),
        ("TRANSACTIONAL_ID", f"{api}-bench", "PREFIXED", "DESCRIBE"),
    ]


def protocol_cost(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each engine's ``max`` records/s per protocol and SASL_SSL's over PLAINTEXT's."""
    by_engine: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.get("phase") == "max" and "records_per_s" in row:
            protocol = row.get("protocol", "PLAINTEXT")
            by_engine.setdefault(row["engine"], {})[protocol] = row["records_per_s"]
    for figures in by_engine.values():
        if figures.get("PLAINTEXT") and "SASL_SSL" in figures:
            figures["ratio"] = round(figures["SASL_SSL"] / figures["PLAINTEXT"], 3)
    return by_engine


def _start_broker(protocol: str, args: argparse.Namespace) -> Any:
    """A started broker for ``protocol``; sets ``args``' client settings for it: ``client``
    (librdkafka's, the load side's, as the admin) and ``properties`` (the job's, Java's
    names, as the job's principal)."""
    if protocol == "SASL_SSL":
        from tests.fixtures.kafka_secured import JOB, SecuredKafkaBroker

        broker: Any = SecuredKafkaBroker()
        broker.start()
        args.client = broker.client_config()
        args.properties = broker.java_properties(JOB, store="jks")
    else:
        from tests.fixtures.kafka import KafkaBroker

        broker = KafkaBroker()
        broker.start()
        args.client = {"bootstrap.servers": broker.bootstrap_servers}
        args.properties = {}
    args.protocol = protocol
    args.bootstrap = broker.bootstrap_servers
    return broker


def _commit() -> str:
    """The benchmarked tree's commit (``+dirty`` with uncommitted changes)."""
    try:
        rev = subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return rev + ("+dirty" if dirty else "")


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line (``--help`` lists it)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--engines", nargs="+", choices=list(ENGINES), default=list(ENGINES))
    parser.add_argument("--warmup", type=int, default=5_000, help="records before the start")
    parser.add_argument("--max-first", type=int, default=5_000, help="first max round")
    parser.add_argument("--max-seconds", type=float, default=20)
    parser.add_argument("--max-rounds", type=int, default=4)
    parser.add_argument(
        "--max-repeats",
        type=int,
        default=3,
        help="rounds of the final size; their median is the maximum (1: the first alone)",
    )
    parser.add_argument("--backlog", type=int, default=1_000_000, help="largest max round")
    parser.add_argument("--rate", type=int, default=1000, help="sustained phase, records/s")
    parser.add_argument("--near-max", type=float, default=0.8)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--settle", type=float, default=8)
    parser.add_argument("--drain-seconds", type=float, default=40)
    parser.add_argument("--catch-up-seconds", type=float, default=15)
    parser.add_argument("--start-timeout", type=float, default=120)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--pyflink-python", default="/tmp/pyflink-venv/bin/python")
    parser.add_argument(
        "--pyflink-conf", action="append", default=[], help="PyFlink key=value (repeatable)"
    )
    parser.add_argument(
        "--sparkpoint-conf",
        action="append",
        default=[],
        help="sparkpoint key=value (repeatable), e.g. sparkpoint.epoch.interval=0",
    )
    parser.add_argument(
        "--checkpoint-interval-ms",
        type=int,
        default=1000,
        help="sparkpoint's and PyFlink's checkpoint interval",
    )
    parser.add_argument(
        "--guarantee",
        choices=["EXACTLY_ONCE", "AT_LEAST_ONCE"],
        default="EXACTLY_ONCE",
        help="sparkpoint's and PyFlink's Kafka sink (AT_LEAST_ONCE: published at every "
        "epoch end or flush, without waiting for the checkpoint)",
    )
    parser.add_argument(
        "--protocols",
        nargs="+",
        choices=["PLAINTEXT", "SASL_SSL"],
        default=["PLAINTEXT"],
        help="one broker after the other, each engine against each",
    )
    parser.add_argument("--max-only", action="store_true", help="only the warmup and max phases")
    parser.add_argument(
        "--markdown", metavar="JSONL", help="print the table of a run's output ('-': stdin)"
    )
    return parser.parse_args(argv)


def main() -> None:
    """Run the engines one after the other against one broker (or ``--markdown``)."""
    argv = sys.argv[1:]
    args = parse_args(argv)
    if args.markdown:
        with open(args.markdown) if args.markdown != "-" else sys.stdin as f:
            print(table(read_json_lines(f)))
        return
    # A SIGTERM (from `timeout`) unwinds through the finally blocks below, which stop the
    # engine's process tree (a session of its own) and the broker.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    work = tempfile.mkdtemp(prefix="kafka-latency-")
    t0 = time.time()
    start = {"run": "start", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    emit({**start, "commit": _commit(), "argv": argv, "args": vars(args)})
    rows: list[dict[str, Any]] = []
    try:
        for protocol in args.protocols:
            broker = _start_broker(protocol, args)
            try:
                for engine in args.engines:
                    rows += run_engine(engine, args, broker, work)
            finally:
                broker.stop()
        if len(args.protocols) > 1:
            emit({"protocol_cost": protocol_cost(rows)})
        emit({"table": rows, "seconds": round(time.time() - t0)})
    finally:
        if os.environ.get("KAFKA_LATENCY_KEEP") is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work dir kept: {work}", file=sys.stderr)


if __name__ == "__main__":
    main()
