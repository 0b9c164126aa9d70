"""Chaos run: random faults on a multi-executor Spark cluster, exact results every round.

Runs rounds of the two-stage keyed job of the cluster tests (a keyed count at parallelism
3 feeding one at parallelism 6, exactly-once file sinks, checkpoints every second) on
``local-cluster[3,1,1024]`` (or, with ``--standalone``, a standalone master and three
workers in their own mount namespaces when run as root), until at least ``--minutes`` have
passed and ``--faults`` faults have fired. Every round draws random faults:

- ``user-exception``: a user function raises at a chosen record, once (Spark retries the
  task) or four times (more than Spark's attempts: the job fails over);
- ``worker-kill``: a Python worker SIGKILLs itself at a chosen record;
- ``commit-failure``: a task fails right after a keyed subtask committed its state locally;
- ``executor-kill``: the driver SIGKILLs the executor JVM holding a random keyed subtask,
  in the middle of an epoch;
- ``upload-kill``: the Python worker uploading a checkpoint in the background SIGKILLs
  itself (the checkpoint is aborted; the job goes on).

Two rounds in three use changelog checkpoints (``state.backend.changelog.enabled``),
materializing every 3 s or every 10 minutes; periodic materializations upload in the
background, in some rounds at 64 KiB per second and subtask, so that faults hit them
mid-upload (``upload-kill`` hits them too: a materialization's id is its checkpoint's).

Each round's output is checked record by record; the script prints one JSON line per round
and a summary: how often each fault fired and each kind of recovery happened. Not run by CI.
Run it under the shared lock: ``flock /tmp/sparkpoint-heavy.lock python scripts/chaos.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from sparkpoint.testing import CountAndEcho, FailureInjector  # noqa: E402

EVENTS, KEYS, KEYS2 = 60_000, 50, 70
RECORDS_PER_SPLIT = 500  # two splits: 60 epochs per round


class Chaos:
    """Record -> injector, for faults raised inside user functions (pickled into tasks)."""

    def __init__(self, injectors: dict[int, FailureInjector]) -> None:
        self.injectors = injectors

    def at(self, record: int) -> None:
        injector = self.injectors.get(record)
        if injector is not None:
            injector.maybe_fail(record)


class ChaoticCount(CountAndEcho):
    """``CountAndEcho`` that hits the round's keyed-stage faults."""

    def __init__(self, chaos: Chaos) -> None:
        super().__init__()
        self.chaos = chaos

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.chaos.at(value[1])
        return super().process_element(value, ctx)


def build_job(env: Any, out1: str, out2: str, map_chaos: Chaos, keyed_chaos: Chaos) -> None:
    from sparkpoint.common import Encoder
    from sparkpoint.connectors.number_seq import NumberSequenceSource
    from sparkpoint.datastream.connectors.file_system import FileSink

    def to_pair(x: int) -> tuple[int, int]:
        map_chaos.at(x)
        return (x % KEYS, x)

    encoder = Encoder.simple_string_encoder()
    counted = (
        env.from_source(NumberSequenceSource(0, EVENTS - 1), None, "numbers")
        .uid("numbers")
        .map(to_pair)
        .uid("to-pair")
        .key_by(lambda p: p[0])
        .process(ChaoticCount(keyed_chaos))
        .uid("count")
        .set_parallelism(3)
    )
    counted.sink_to(FileSink.for_row_format(out1, encoder).build()).uid("sink1")
    (
        counted.filter(lambda r: r[0] == "rec")
        .uid("records")
        .map(lambda r: (r[2] % KEYS2, r[2]))
        .uid("to-pair-2")
        .key_by(lambda p: p[0])
        .process(CountAndEcho())
        .uid("count2")
        .set_parallelism(6)
        .sink_to(FileSink.for_row_format(out2, encoder).build())
        .uid("sink2")
    )


def check(out: str, keys: int) -> bool:
    from sparkpoint.testing import expected_keyed_count_output
    from tests.runtime.jobs.reference import read_sink

    recs, finals = expected_keyed_count_output(EVENTS, keys)
    got = read_sink(out)
    echoed = [o for o in got if o[0] == "rec"]
    final = [o for o in got if o[0] == "final"]
    return (
        len(echoed) == EVENTS
        and set(echoed) == recs
        and len(final) == keys
        and {o[1]: (o[2], o[3]) for o in final} == finals
    )


def run_round(
    spark: Any, work: str, rng: random.Random, index: int, epoch_mode: str = "auto"
) -> dict[str, Any]:
    from sparkpoint.common import Configuration, RestartStrategies
    from sparkpoint.datastream import (
        EmbeddedRocksDBStateBackend,
        FileSystemCheckpointStorage,
        HashMapStateBackend,
        StreamExecutionEnvironment,
    )
    from sparkpoint.runtime.spark.cluster import SparkCluster
    from sparkpoint.testing import EpochStart, Faults, kill_executor

    round_dir = os.path.join(work, f"round-{index}")
    shutil.rmtree(round_dir, ignore_errors=True)
    backend = rng.choice(["hashmap", "rocksdb"])
    # changelog checkpoints in half the rounds: materializing often (composed checkpoints
    # and new materializations under faults) or every ten minutes (long changelogs)
    materialize = rng.choice([None, "3 s", "10 min"])
    upload_rate = rng.choice([None, "64 kb"]) if materialize == "3 s" else None
    planned: Counter[str] = Counter()
    map_faults: dict[int, FailureInjector] = {}
    keyed_faults: dict[int, FailureInjector] = {}
    kinds: dict[str, str] = {}  # injector directory -> fault kind

    def injector(kind: str, record: int, times: int, mode: str) -> FailureInjector:
        directory = os.path.join(round_dir, "faults", f"{kind}-{record}")
        kinds[directory] = kind
        planned[kind] += 1
        return FailureInjector(directory, record, times=times, mode=mode)

    records = rng.sample(range(EVENTS), 8)
    for record in records[:2]:
        map_faults[record] = injector("user-exception", record, rng.choice([1, 4]), "raise")
    for record in records[2:4]:
        keyed_faults[record] = injector("user-exception", record, rng.choice([1, 4]), "raise")
    for record in records[4:6]:
        keyed_faults[record] = injector("worker-kill", record, 1, "kill")
    commit_epochs = rng.sample(range(2, 50), 2)
    commit = [injector("commit-failure", e, 1, "raise") for e in commit_epochs]
    uploads = [injector("upload-kill", c, 1, "kill") for c in rng.sample(range(2, 12), 1)]
    kill_epochs = sorted(rng.sample(range(5, 55), 2))
    if abs(kill_epochs[0] - kill_epochs[1]) < 10:
        kill_epochs = kill_epochs[:1]
    planned["executor-kill"] += len(kill_epochs)

    conf = Configuration()
    conf.set_string("sparkpoint.epoch.mode", epoch_mode)
    conf.set_string("sparkpoint.epoch.max-records-per-split", str(RECORDS_PER_SPLIT))
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(2)
    env.enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage(os.path.join(round_dir, "ckpt"))
    )
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1000, 0))
    env.set_state_backend(
        EmbeddedRocksDBStateBackend(True) if backend == "rocksdb" else HashMapStateBackend()
    )
    if materialize is not None:
        env.enable_changelog_state_backend(True)
        env.configure({"state.backend.changelog.periodic-materialize.interval": materialize})
        if upload_rate is not None:
            env.configure(
                {"sparkpoint.state.changelog.materialization.max-upload-rate": upload_rate}
            )
    cluster = SparkCluster(spark)
    app_id = spark.sparkContext.applicationId
    killed: list[str] = []

    def kill_some_executor(event: EpochStart) -> None:
        if not kill_epochs or event.epoch < kill_epochs[0]:
            return
        if len(cluster.executor_ids()) < 3:
            return  # wait for the replacement of the last one
        kill_epochs.pop(0)
        operator = rng.choice(sorted(event.placement))
        executor = rng.choice(event.placement[operator])
        killed.append(executor)
        threading.Timer(rng.uniform(0.05, 0.4), kill_executor, (app_id, executor)).start()

    faults = Faults().on_epoch_start(kill_some_executor)
    for inj, epoch in zip(commit, commit_epochs):
        faults.fail_after_local_commit(inj, "count", epoch % 3)
    for inj in uploads:
        faults.fail_upload(inj)
    env.set_fault_injection(faults)
    out1, out2 = os.path.join(round_dir, "out1"), os.path.join(round_dir, "out2")
    build_job(env, out1, out2, Chaos(map_faults), Chaos(keyed_faults))
    t0 = time.monotonic()
    result = env.execute(f"chaos-{index}")
    fired: Counter[str] = Counter()
    for inj in [*map_faults.values(), *keyed_faults.values(), *commit, *uploads]:
        if inj.fired():
            fired[kinds[inj.directory]] += 1
    fired["executor-kill"] += len(killed)
    exact = check(out1, KEYS) and check(out2, KEYS2)
    summary = {
        "round": index,
        "backend": backend,
        "changelog_materialize": materialize,
        "materialization_upload_rate": upload_rate,
        "materializations_adopted": len(result.materializations),
        "seconds": round(time.monotonic() - t0, 1),
        "epochs": result.epochs,
        "faults": dict(fired),
        "failovers": len(result.failovers),
        "subtask_restores": len(result.subtask_restores),
        "epochs_run_again": sum(1 for e in result.epoch_reports if e.runs > 1),
        "checkpoints_completed": sum(1 for c in result.checkpoints if c.status == "COMPLETED"),
        "checkpoints_aborted": sum(1 for c in result.checkpoints if c.status == "FAILED"),
        "exact": exact,
    }
    shutil.rmtree(round_dir, ignore_errors=True)
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--faults", type=int, default=100)
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument(
        "--epoch-mode",
        choices=["auto", "job", "long-running"],
        default="auto",
        help="sparkpoint.epoch.mode (the default: auto)",
    )
    parser.add_argument(
        "--standalone", action="store_true", help="a standalone cluster of three isolated workers"
    )
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])
    from sparkpoint.runtime.spark.cluster import SparkCluster
    from sparkpoint.runtime.spark.session import get_spark_session
    from tests.fixtures.spark_cluster import StandaloneCluster, spark_home

    work = tempfile.mkdtemp(prefix="sparkpoint-chaos-")
    os.environ["SPARK_HOME"] = spark_home(work)
    standalone = StandaloneCluster(work).start() if args.standalone else None
    rng = random.Random(args.seed)
    totals: Counter[str] = Counter()
    recoveries: Counter[str] = Counter()
    exact = True
    started = time.monotonic()
    try:
        spark = get_spark_session(
            standalone.url if standalone else "local-cluster[3,1,1024]",
            {"spark.task.maxFailures": "4"},
        )
        while len(SparkCluster(spark).executor_ids()) < 3:
            time.sleep(0.5)
        index = 0
        while time.monotonic() - started < args.minutes * 60 or sum(totals.values()) < args.faults:
            index += 1
            summary = run_round(spark, work, rng, index, args.epoch_mode)
            print(json.dumps(summary), flush=True)
            totals.update(summary["faults"])
            recoveries.update(
                {
                    k: summary[k]
                    for k in (
                        "failovers",
                        "subtask_restores",
                        "epochs_run_again",
                        "checkpoints_completed",
                        "checkpoints_aborted",
                        "materializations_adopted",
                    )
                }
            )
            exact = exact and summary["exact"]
        spark.stop()
    finally:
        if standalone is not None:
            standalone.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(
        json.dumps(
            {
                "summary": True,
                "minutes": round((time.monotonic() - started) / 60, 1),
                "rounds": index,
                "faults": dict(totals),
                "faults_total": sum(totals.values()),
                "recoveries": dict(recoveries),
                "all_exact": exact,
            }
        ),
        flush=True,
    )
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
