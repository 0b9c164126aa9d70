"""Where an epoch's time goes in the Kafka -> keyed count -> Kafka EXACTLY_ONCE pipeline of
``bench/kafka_latency`` (8 partitions, 1M keys, checkpoints every second, ``local[2]``) at a
paced input rate, with the end-to-end latency it delivers.

The job runs in this process, so the driver's phases are timed by wrapping the public
methods that do them (planning ranges, pacing waits, the epoch's Spark job, sink commits
and the sweep of lingering transactions, checkpoint completion); the Python workers are
sampled with ``py-spy`` (when installed) for the same window, and their samples are
attributed to the innermost sparkpoint or Kafka-client frame. The baseline is the same run's
epoch period: every phase is printed as a share of the window's wall time.

Run: ``python -m bench.kafka_epoch_breakdown [--rate 5000 --seconds 30 --backlog 200000]``
(it starts its own broker and Spark; one JSON line per result).
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def emit(**fields: Any) -> None:
    """One JSON line."""
    print(json.dumps(fields), flush=True)


class PhaseTimer:
    """Wall time spent in wrapped driver methods, per phase, while ``active``."""

    def __init__(self) -> None:
        self.active = False
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self.calls: dict[str, int] = collections.defaultdict(int)
        self.spark_jobs: list[tuple[float, dict[int, float]]] = []
        self.job_calls: list[tuple[float, float]] = []  # wall-clock ms of each epoch job call
        self.closure_bytes: list[int] = []  # size of each pickled closure
        self.lock = threading.Lock()

    def wrap(self, cls: Any, method: str, phase: str) -> None:
        """Time every call of ``cls.method`` as ``phase``."""
        inner = getattr(cls, method)

        @functools.wraps(inner)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            wall0 = time.time() * 1000
            try:
                out = inner(*args, **kwargs)
            finally:
                if self.active:
                    with self.lock:
                        self.seconds[phase] += time.perf_counter() - t0
                        self.calls[phase] += 1
            if phase.startswith("pickling") and self.active:
                self.closure_bytes.append(len(out[0]))
            if phase == "spark_job" and self.active:
                per_stage: dict[int, float] = collections.defaultdict(float)
                for report in out:
                    per_stage[report.stage] = max(per_stage[report.stage], report.seconds)
                self.spark_jobs.append((time.perf_counter() - t0, dict(per_stage)))
                self.job_calls.append((wall0, time.time() * 1000))
            return out

        setattr(cls, method, timed)


def instrument(timer: PhaseTimer) -> None:
    """Wrap the driver's phases (public methods only)."""
    from sparkpoint.connectors.kafka_sink import KafkaSink
    from sparkpoint.runtime.driver.epoch_checkpoints import EpochCheckpoints
    from sparkpoint.runtime.driver.job_requests import RequestQueue
    from sparkpoint.runtime.driver.sink_commits import SinkCommits
    from sparkpoint.runtime.driver.source_coordinator import SourceCoordinator
    from sparkpoint.runtime.driver.task_specs import TaskSpecs
    from sparkpoint.runtime.spark.epoch import EpochRunner
    from sparkpoint.runtime.spark.long_running import LongRunningRunner

    timer.wrap(SourceCoordinator, "plan_epoch", "plan_ranges (end offsets of 8 partitions)")
    timer.wrap(RequestQueue, "wait", "pacing_wait")
    # An epoch's run: one Spark job (sparkpoint.epoch.mode=job), or the orders to the
    # long-running tasks until their last report.
    timer.wrap(EpochRunner, "run", "spark_job")
    timer.wrap(LongRunningRunner, "run", "spark_job")
    # PySpark pickles every Python RDD's closure (the stage's function with the epoch's spec)
    import pyspark.core.rdd as pyspark_rdd

    timer.wrap(pyspark_rdd, "_prepare_for_python_RDD", "pickling closures (pyspark)")
    timer.wrap(TaskSpecs, "epoch_spec", "epoch_spec (the tasks' spec)")
    timer.wrap(EpochCheckpoints, "trigger", "checkpoint_trigger")
    timer.wrap(EpochCheckpoints, "epoch_accepted", "checkpoint_acks")
    timer.wrap(EpochCheckpoints, "epoch_ended", "checkpoint_complete_and_commit")
    timer.wrap(SinkCommits, "commit_up_to", "sink_commit_up_to (EndTxn + sweep)")
    timer.wrap(KafkaSink, "commit", "kafka_end_txn")
    timer.wrap(KafkaSink, "abort_lingering", "kafka_sweep_lingering")


def start_py_spy(seconds: float, out: str) -> subprocess.Popen[bytes] | None:
    """Sample this process and its children (Spark's JVM, the Python workers) for
    ``seconds``, idle threads included, as raw collapsed stacks."""
    exe = shutil.which("py-spy")
    if exe is None:
        return None
    return subprocess.Popen(
        [
            exe,
            "record",
            "--pid",
            str(os.getpid()),
            "--subprocesses",
            "--idle",
            "--nonblocking",
            "--rate",
            "50",
            "--duration",
            str(int(seconds)),
            "--format",
            "raw",
            "--output",
            out,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


_INTERESTING = ("sparkpoint/", "confluent_kafka", "kafka/", "bench/")


def worker_frames(path: str, top: int) -> dict[str, Any]:
    """The Python workers' samples by their innermost sparkpoint/Kafka frame (the line
    that waits or works), and the share of samples in a task at all."""
    by_frame: collections.Counter[str] = collections.Counter()
    by_function: collections.Counter[str] = collections.Counter()
    total = in_task = 0
    workers: set[str] = set()
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            stack, _sep, count_s = line.rstrip("\n").rpartition(" ")
            frames = stack.split(";")
            procs = [fr for fr in frames if fr.startswith("process ")]
            if len(procs) < 2 or "pyspark" not in procs[-1]:
                continue  # not a Python worker of Spark
            workers.add(procs[-1].split(":", 1)[0])
            n = int(count_s)
            total += n
            inner = [fr for fr in frames if any(m in fr for m in _INTERESTING)]
            if not inner:
                continue
            in_task += n
            by_frame[inner[-1]] += n
            for fr in {fr.split(" (", 1)[0] for fr in inner}:
                by_function[fr] += n
    return {
        "worker_processes": len(workers),
        "samples": total,
        "samples_in_sparkpoint": in_task,
        "innermost_frames": by_frame.most_common(top),
        "functions_inclusive": by_function.most_common(top),
    }


def driver_frames(path: str, top: int) -> dict[str, Any]:
    """The job master thread's samples by innermost sparkpoint/Kafka frame."""
    by_frame: collections.Counter[str] = collections.Counter()
    total = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            stack, _sep, count_s = line.rstrip("\n").rpartition(" ")
            frames = stack.split(";")
            if sum(1 for fr in frames if fr.startswith("process ")) != 1:
                continue  # a child process's stack
            if not any("job_master.py" in fr for fr in frames):
                continue
            n = int(count_s)
            total += n
            inner = [fr for fr in frames if any(m in fr for m in _INTERESTING)]
            by_frame[inner[-1] if inner else frames[-1]] += n
    return {"samples": total, "innermost_frames": by_frame.most_common(top)}


_TASK_METRICS = {
    # name in the table: (how to read it from a SparkListenerTaskEnd event, in ms)
    "scheduler_delay": lambda e, sub: e["Task Info"]["Launch Time"] - sub,
    "deserialize": lambda e, sub: _m(e).get("Executor Deserialize Time", 0),
    "run": lambda e, sub: _m(e).get("Executor Run Time", 0),
    "result_serialize": lambda e, sub: _m(e).get("Result Serialization Time", 0),
    "getting_result": lambda e, sub: _getting_result(e),
    "shuffle_write": lambda e, sub: (
        _m(e).get("Shuffle Write Metrics", {}).get("Shuffle Write Time", 0) / 1e6
    ),
    "shuffle_fetch_wait": lambda e, sub: (
        _m(e).get("Shuffle Read Metrics", {}).get("Fetch Wait Time", 0)
    ),
    "jvm_gc": lambda e, sub: _m(e).get("JVM GC Time", 0),
    "task": lambda e, sub: e["Task Info"]["Finish Time"] - e["Task Info"]["Launch Time"],
}


def _m(ev: dict[str, Any]) -> dict[str, Any]:
    return ev.get("Task Metrics") or {}


def _getting_result(ev: dict[str, Any]) -> float:
    got = ev["Task Info"].get("Getting Result Time", 0)
    return ev["Task Info"]["Finish Time"] - got if got else 0


def read_event_log(event_dir: str) -> tuple[dict[int, Any], dict[int, Any], dict[int, Any]]:
    """Jobs, stages and task-end events of Spark's (uncompressed) event log."""
    jobs: dict[int, dict[str, Any]] = {}
    stages: dict[int, dict[str, Any]] = {}
    tasks: dict[int, list[dict[str, Any]]] = collections.defaultdict(list)
    paths = [os.path.join(d, n) for d, _dirs, names in os.walk(event_dir) for n in names]
    for path in sorted(paths):
        if os.path.basename(path).startswith("appstatus"):
            continue  # Spark's marker of a rolling log in progress
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue  # a line Spark is still writing
                kind = ev.get("Event")
                if kind == "SparkListenerJobStart":
                    jobs[ev["Job ID"]] = {"start": ev["Submission Time"], "stages": ev["Stage IDs"]}
                elif kind == "SparkListenerJobEnd" and ev["Job ID"] in jobs:
                    jobs[ev["Job ID"]]["end"] = ev["Completion Time"]
                elif kind == "SparkListenerStageCompleted":
                    info = ev["Stage Info"]
                    stages[info["Stage ID"]] = info
                elif kind == "SparkListenerTaskEnd":
                    tasks[ev["Stage ID"]].append(ev)
    return jobs, stages, tasks


def spark_jobs(
    event_dir: str,
    since_ms: float,
    until_ms: float,
    calls: list[tuple[float, float]] | None = None,
) -> dict[str, Any]:
    """From Spark's event log: per job started in [since_ms, until_ms), the time from the
    job's submission to its first stage, each stage's duration and, per stage, the slowest
    task's scheduler delay (stage submitted -> task launched: locality waits and a second
    wave included), deserialization, run, result serialization, result fetch, shuffle
    write and fetch wait; medians over the jobs. ``calls`` (wall-clock ms of the driver's
    calls that each ran one job, start and end) adds the driver's side: from the call to the
    job's submission, and from the job's end to the call's return."""
    jobs, stages, tasks = read_event_log(event_dir)
    rows: dict[str, list[float]] = collections.defaultdict(list)
    counted = 0
    for job in sorted(jobs.values(), key=lambda j: j["start"]):
        if "end" not in job or not since_ms <= job["start"] < until_ms:
            continue
        ran = sorted(
            (stages[s] for s in job["stages"] if s in stages and "Submission Time" in stages[s]),
            key=lambda st: st["Submission Time"],
        )
        if not ran:
            continue
        counted += 1
        rows["job_ms"].append(job["end"] - job["start"])
        rows["until_first_stage_ms"].append(ran[0]["Submission Time"] - job["start"])
        rows["after_last_stage_ms"].append(job["end"] - ran[-1]["Completion Time"])
        for call_start, call_end in calls or ():
            if call_start <= job["start"] <= call_end:
                rows["driver_before_job_ms"].append(job["start"] - call_start)
                rows["driver_after_job_ms"].append(call_end - job["end"])
                break
        previous_end = None
        for i, st in enumerate(ran):
            sub, end = st["Submission Time"], st["Completion Time"]
            rows[f"stage{i}_ms"].append(end - sub)
            if previous_end is not None:
                rows[f"gap_before_stage{i}_ms"].append(sub - previous_end)
            previous_end = end
            evs = tasks.get(st["Stage ID"], [])
            if not evs:
                continue
            rows[f"stage{i}_tasks"].append(len(evs))
            rows[f"stage{i}_last_task_end_to_stage_end_ms"].append(
                end - max(e["Task Info"]["Finish Time"] for e in evs)
            )
            for name, read in _TASK_METRICS.items():
                rows[f"stage{i}_max_{name}_ms"].append(max(read(e, sub) for e in evs))
    return {"jobs": counted, **{k: percentile(v, 0.5) for k, v in sorted(rows.items())}}


def empty_two_stage_jobs(spark: Any, source_tasks: int, keyed_tasks: int, runs: int) -> list[float]:
    """The baseline: an empty Python job of the epoch's shape (``source_tasks`` tasks, a
    shuffle to ``keyed_tasks`` partitions, ``collect``), wall seconds per run."""
    sc = spark.sparkContext
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        (
            sc.parallelize(range(source_tasks), source_tasks)
            .map(lambda x: (x % keyed_tasks, x))
            .partitionBy(keyed_tasks)
            .mapPartitions(lambda it: [sum(1 for _ in it)])
            .collect()
        )
        walls.append(time.perf_counter() - t0)
    return walls


def baseline_jobs(
    event_dir: str, epoch_jobs: dict[str, Any], runs: int, source_tasks: int | None = None
) -> dict[str, Any]:
    """The empty two-stage job with the epoch jobs' task counts (or ``source_tasks`` in its
    first stage), in the same session (warmed up by three runs): its wall time and its
    event-log breakdown."""
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if source_tasks is None:
        source_tasks = int(epoch_jobs.get("stage0_tasks") or 4)
    keyed_tasks = int(epoch_jobs.get("stage1_tasks") or 2)
    empty_two_stage_jobs(spark, source_tasks, keyed_tasks, 3)
    since = time.time() * 1000
    walls = empty_two_stage_jobs(spark, source_tasks, keyed_tasks, runs)
    time.sleep(1.0)  # let the event log catch up
    logged = spark_jobs(event_dir, since, time.time() * 1000)
    return {
        "source_tasks": source_tasks,
        "keyed_tasks": keyed_tasks,
        "wall_ms_median": percentile([1000 * w for w in walls], 0.5),
        **logged,
    }


# Rows of the table: (label, where the epoch's figure is, where the baseline's is). A figure
# is a key of the event-log summary, or ("phase", name) for a driver phase's ms per call.
_ROWS: list[tuple[str, Any, Any]] = [
    ("driver: plan ranges (Kafka end offsets)", ("phase", "plan_ranges"), None),
    ("driver: checkpoint trigger", ("phase", "checkpoint_trigger"), None),
    ("driver: tasks' spec", ("phase", "epoch_spec"), None),
    ("driver: call -> Spark job submitted (RDDs, closures)", "driver_before_job_ms", None),
    ("driver: of which pickling one closure (per call)", ("phase", "pickling"), None),
    ("spark: job submitted -> first stage", "until_first_stage_ms", "until_first_stage_ms"),
    (
        "source stage: scheduler delay (slowest task)",
        "stage0_max_scheduler_delay_ms",
        "stage0_max_scheduler_delay_ms",
    ),
    ("source stage: deserialize", "stage0_max_deserialize_ms", "stage0_max_deserialize_ms"),
    ("source stage: run (read, parse, shuffle write)", "stage0_max_run_ms", "stage0_max_run_ms"),
    ("source stage: shuffle write", "stage0_max_shuffle_write_ms", "stage0_max_shuffle_write_ms"),
    ("source stage: whole stage", "stage0_ms", "stage0_ms"),
    ("between stages", "gap_before_stage1_ms", "gap_before_stage1_ms"),
    (
        "keyed stage: scheduler delay (incl. locality wait)",
        "stage1_max_scheduler_delay_ms",
        "stage1_max_scheduler_delay_ms",
    ),
    ("keyed stage: deserialize", "stage1_max_deserialize_ms", "stage1_max_deserialize_ms"),
    (
        "keyed stage: shuffle fetch wait",
        "stage1_max_shuffle_fetch_wait_ms",
        "stage1_max_shuffle_fetch_wait_ms",
    ),
    (
        "keyed stage: run (state, sink, snapshot, upload wait)",
        "stage1_max_run_ms",
        "stage1_max_run_ms",
    ),
    (
        "keyed stage: result serialize / fetch",
        "stage1_max_getting_result_ms",
        "stage1_max_getting_result_ms",
    ),
    ("keyed stage: whole stage", "stage1_ms", "stage1_ms"),
    ("spark: last stage -> job end", "after_last_stage_ms", "after_last_stage_ms"),
    ("spark: whole job (event log)", "job_ms", "job_ms"),
    (
        "driver: the epoch's run (its Spark job call; long-running: orders -> last report)",
        ("phase", "spark_job"),
        "wall_ms_median",
    ),
    ("of which the source stage's slowest task group", ("stage", 0), None),
    ("of which the keyed stage's slowest task group", ("stage", 1), None),
    ("driver: job end -> results in Python", "driver_after_job_ms", None),
    ("driver: checkpoint acks", ("phase", "checkpoint_acks"), None),
    ("driver: sink commit (EndTxn + sweep)", ("phase", "sink_commit_up_to"), None),
    ("driver: pacing wait (per wait)", ("phase", "pacing_wait"), None),
]


def print_table(
    timer: PhaseTimer,
    jobs: int,
    epoch_jobs: dict[str, Any],
    baseline: dict[str, Any],
    workers: dict[str, Any],
    latencies: list[float],
) -> None:
    """The breakdown as a Markdown table on stderr (ms, medians per epoch), the worker's
    sampled functions after it."""

    def phase(name: str) -> float | None:
        for key, secs in timer.seconds.items():
            if key.startswith(name):
                return round(1000 * secs / max(1, timer.calls[key]), 1)
        return None

    def stage(index: int) -> float | None:
        return percentile([1000 * per[index] for _w, per in timer.spark_jobs if index in per], 0.5)

    def figure(where: Any, summary: dict[str, Any]) -> str:
        if where is None:
            return ""
        if isinstance(where, tuple):
            value = phase(where[1]) if where[0] == "phase" else stage(where[1])
        else:
            value = summary.get(where)
        return "" if value is None else f"{value:g}"

    out = [
        f"| per epoch, ms (medians of {jobs} epochs) | epoch | empty two-stage job |",
        "|---|---|---|",
    ]
    for label, mine, base in _ROWS:
        out.append(f"| {label} | {figure(mine, epoch_jobs)} | {figure(base, baseline)} |")
    if latencies:
        out.append(
            f"| latency p50 / p99 | {percentile(latencies, 0.5)} / "
            f"{percentile(latencies, 0.99)} | |"
        )
    print("\n".join(out), file=sys.stderr, flush=True)
    if workers.get("functions_inclusive"):
        per_epoch = 1000 / 50 / max(1, jobs)  # py-spy samples at 50 Hz
        print(
            "Python workers, ms per epoch summed over workers (sampled, inclusive):",
            file=sys.stderr,
        )
        for frame, n in workers["functions_inclusive"]:
            print(f"  {n * per_epoch:8.1f}  {frame}", file=sys.stderr)


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile of ``values`` (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--settle", type=float, default=6)
    parser.add_argument("--backlog", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--profile-out", default="")
    parser.add_argument("--baseline-runs", type=int, default=20)
    parser.add_argument("--conf", action="append", default=[], help="sparkpoint key=value")
    parser.add_argument("--checkpoint-interval-ms", type=int, default=1000)
    parser.add_argument(
        "--guarantee", choices=["EXACTLY_ONCE", "AT_LEAST_ONCE"], default="EXACTLY_ONCE"
    )
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from bench.kafka_latency import datastream_job
    from bench.kafka_latency.load import (
        LatencyConsumer,
        PacedProducer,
        write_backlog,
    )
    from tests.fixtures.kafka import KafkaBroker

    timer = PhaseTimer()
    instrument(timer)
    work = tempfile.mkdtemp(prefix="kafka-breakdown-")
    broker = KafkaBroker()
    client = None
    consumer = None
    try:
        broker.start()
        broker.create_topic("bd-in", args.partitions)
        broker.create_topic("bd-out", args.partitions)
        kafka_client = {"bootstrap.servers": broker.bootstrap_servers}
        write_backlog(kafka_client, "bd-in", args.backlog, args.keys)
        consumer = LatencyConsumer(kafka_client, "bd-out")
        job_args = argparse.Namespace(
            bootstrap=broker.bootstrap_servers,
            source="bd-in",
            sink="bd-out",
            checkpoints=os.path.join(work, "checkpoints"),
            jar="",
            parallelism=2,
            conf=args.conf,
            checkpoint_interval_ms=args.checkpoint_interval_ms,
            guarantee=args.guarantee,
        )
        event_dir = os.path.join(work, "events")
        os.makedirs(event_dir)
        from sparkpoint.runtime.spark.session import get_spark_session

        get_spark_session(
            None,
            {
                "spark.eventLog.enabled": "true",
                "spark.eventLog.dir": "file://" + event_dir,
                "spark.eventLog.compress": "false",  # Spark 4 compresses by default
            },
        )
        env = datastream_job.build("sparkpoint", job_args)
        t_start = time.time()
        client = env.execute_async("kafka-epoch-breakdown")
        if not consumer.wait_for(args.backlog, 300):
            raise RuntimeError(f"backlog not out after 300 s ({consumer.count})")
        emit(what="backlog_out", records=args.backlog, seconds=round(time.time() - t_start, 1))
        before = consumer.count
        producer = PacedProducer(kafka_client, "bd-in", args.rate, args.seconds, args.keys)
        time.sleep(args.settle)
        window = args.seconds - args.settle
        profile = args.profile_out or os.path.join(work, "py-spy.txt")
        spy = start_py_spy(window, profile)
        epochs0 = len(client.get_epoch_reports())
        cps0 = {c.checkpoint_id for c in client.get_checkpoint_statistics()}
        timer.active = True
        w0 = time.perf_counter()
        since_ms = time.time() * 1000
        time.sleep(window)
        until_ms = time.time() * 1000
        timer.active = False
        wall = time.perf_counter() - w0
        sent = producer.join()
        caught_up = consumer.wait_for(before + sent, 60)
        if spy is not None:
            spy.wait(60)
        lo = producer.start * 1000 + args.settle * 1000
        lat = consumer.latencies_ms(lo, (producer.start + args.seconds) * 1000)
        reports = client.get_epoch_reports()[epochs0:]
        cps = [
            c
            for c in client.get_checkpoint_statistics()
            if c.checkpoint_id not in cps0 and c.status == "COMPLETED"
        ]
        epoch_s = [r.seconds for r in reports]
        stages: dict[int, list[float]] = collections.defaultdict(list)
        job_walls = []
        for job_wall, per_stage in timer.spark_jobs:
            job_walls.append(job_wall)
            for stage, secs in per_stage.items():
                stages[stage].append(secs)
        emit(
            what="epochs",
            window_s=round(wall, 1),
            epochs=len(reports),
            epoch_period_s=round(wall / max(1, len(reports)), 3),
            epoch_run_s_median=percentile(epoch_s, 0.5),
            epoch_run_s_max=percentile(epoch_s, 1.0),
            records_per_epoch_median=percentile([float(r.records_in) for r in reports], 0.5),
            checkpoints_completed=len(cps),
            checkpoint_duration_ms_median=percentile([float(c.duration_ms) for c in cps], 0.5),
            epochs_with_checkpoint=sum(1 for r in reports if r.checkpoint_id is not None),
        )
        emit(
            what="driver_phases",
            window_s=round(wall, 1),
            phases={
                k: {
                    "seconds": round(v, 2),
                    "share": round(v / wall, 3),
                    "calls": timer.calls[k],
                    "ms_per_call": round(1000 * v / max(1, timer.calls[k]), 1),
                }
                for k, v in sorted(timer.seconds.items(), key=lambda kv: -kv[1])
            },
        )
        emit(
            what="spark_job_stages",
            jobs=len(job_walls),
            job_wall_s_median=percentile(job_walls, 0.5),
            closures_per_job=round(len(timer.closure_bytes) / max(1, len(job_walls)), 1),
            closure_bytes_median=percentile([float(b) for b in timer.closure_bytes], 0.5),
            slowest_task_s_median_per_stage={
                str(s): percentile(v, 0.5) for s, v in sorted(stages.items())
            },
        )
        epoch_jobs: dict[str, Any] = {}
        try:
            epoch_jobs = spark_jobs(event_dir, since_ms, until_ms, timer.job_calls)
            emit(what="spark_event_log", **epoch_jobs)
        except (OSError, ValueError, KeyError) as exc:  # the other results stand
            emit(what="spark_event_log", error=repr(exc))
        emit(
            what="latency",
            rate=args.rate,
            sent=sent,
            caught_up=caught_up,
            latency_ms_p50=percentile(lat, 0.5),
            latency_ms_p99=percentile(lat, 0.99),
            latency_ms_mean=round(statistics.fmean(lat), 1) if lat else None,
            samples=len(lat),
        )
        workers: dict[str, Any] = {}
        if spy is not None and os.path.exists(profile):
            workers = worker_frames(profile, args.top)
            emit(what="workers_py_spy", **workers)
            emit(what="driver_py_spy", **driver_frames(profile, args.top))
        else:
            emit(what="py_spy", detail="not installed or no samples: pip install py-spy")
        client.cancel().result(120)
        client = None
        long_running = "sparkpoint.epoch.mode=job" not in args.conf
        # A long-running job (the auto mode's, alone here, too) runs one task per slot (2 on
        # local[2]): the empty job of that shape is the baseline.
        baseline = baseline_jobs(
            event_dir, epoch_jobs, args.baseline_runs, 2 if long_running else None
        )
        emit(what="baseline_empty_two_stage", **baseline)
        run_ms = percentile([1000 * wall for wall in job_walls], 0.5)
        if run_ms is not None and baseline.get("wall_ms_median"):
            emit(
                what="epoch_run_vs_empty_job",
                epoch_run_ms=run_ms,
                empty_two_stage_job_ms=baseline["wall_ms_median"],
                ratio=round(run_ms / baseline["wall_ms_median"], 2),
            )
        if baseline["source_tasks"] != 4:  # the source stage's shape at 2 tasks per core
            emit(
                what="baseline_empty_two_stage",
                **baseline_jobs(event_dir, epoch_jobs, args.baseline_runs, 4),
            )
        print_table(timer, len(timer.job_calls), epoch_jobs, baseline, workers, lat)
    finally:
        if client is not None:
            try:
                client.cancel().result(120)
            except Exception as exc:  # the measurements above stand
                emit(what="cancel_failed", detail=repr(exc))
        if consumer is not None:
            consumer.stop()
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is not None:
            spark.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
