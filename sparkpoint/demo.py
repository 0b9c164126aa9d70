"""The demo: a stateful streaming job on Spark that kills part of itself and recovers.

A keyed count over a number sequence runs with file-system checkpoints, and every epoch is
shown as it ends (records, keyed tasks that ran on the executor holding their state,
subtask restores, failovers). Midway, a fault strikes:

- ``--fault worker`` (default): a Python worker is killed with SIGKILL on local Spark, which
  is told not to retry tasks, so the job master rolls the whole job back to the latest
  completed checkpoint (a failover);
- ``--fault executor``: on a multi-executor master (``--master local-cluster[3,1,1024]``),
  the executor JVM holding subtask 0 is killed with SIGKILL mid-epoch: only its subtasks
  restore, elsewhere, from the latest checkpoint plus their changelog.

The exactly-once file sink's output is then checked record by record against what the
input implies.
"""

from __future__ import annotations

import argparse
import ast
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Any

__all__ = ["main"]


def _read_output(out_dir: str) -> list[tuple[Any, ...]]:
    lines: list[tuple[Any, ...]] = []
    for name in sorted(os.listdir(out_dir)):
        path = os.path.join(out_dir, name)
        if name.startswith(".") or os.path.isdir(path):
            continue
        with open(path) as f:
            lines.extend(ast.literal_eval(line) for line in f if line.strip())
    return lines


def _private_spark_home(work: str) -> None:
    """Point SPARK_HOME at symlinks to the pip package, so executor work directories land in
    the demo's directory rather than inside site-packages."""
    import pyspark

    real = os.path.dirname(pyspark.__file__)
    home = os.path.join(work, "spark-home")
    os.makedirs(home, exist_ok=True)
    for name in ("bin", "sbin", "jars", "python", "conf"):
        link = os.path.join(home, name)
        if os.path.exists(os.path.join(real, name)) and not os.path.lexists(link):
            os.symlink(os.path.join(real, name), link)
    os.environ["SPARK_HOME"] = home


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns 0 when the recovered result is exact."""
    parser = argparse.ArgumentParser(prog="sparkpoint demo", description=__doc__)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    parser.add_argument("--backend", choices=["hashmap", "rocksdb"], default="rocksdb")
    parser.add_argument("--master", default=None,
                        help="Spark master (default local[P]; e.g. local-cluster[3,1,1024])")
    parser.add_argument("--fault", choices=["worker", "executor"], default="worker")
    args = parser.parse_args(argv)
    multi = bool(args.master) and not args.master.startswith("local[")
    if args.fault == "executor" and not multi:
        parser.error("--fault executor needs a multi-executor --master, e.g. "
                     "local-cluster[3,1,1024]")

    from sparkpoint.runtime.session import get_spark_session, prepare_environment

    prepare_environment()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("sparkpoint.job").setLevel(logging.INFO)
    for noisy in ("py4j", "pyspark"):
        logging.getLogger(noisy).setLevel(logging.ERROR)

    from sparkpoint.common import Configuration, Encoder, RestartStrategies
    from sparkpoint.datastream import (
        CheckpointingMode,
        EmbeddedRocksDBStateBackend,
        FileSystemCheckpointStorage,
        HashMapStateBackend,
        StreamExecutionEnvironment,
    )
    from sparkpoint.datastream.connectors.file_system import FileSink
    from sparkpoint.datastream.connectors.number_seq import NumberSequenceSource
    from sparkpoint.testing import (
        CountAndEcho,
        EpochStart,
        FailureInjector,
        Faults,
        expected_keyed_count_output,
        kill_executor,
    )

    work = args.dir or tempfile.mkdtemp(prefix="sparkpoint-demo-")
    for sub in ("checkpoints", "output", "failures"):
        shutil.rmtree(os.path.join(work, sub), ignore_errors=True)
    ckpt_dir = os.path.join(work, "checkpoints")
    out_dir = os.path.join(work, "output")
    n, keys = args.events, args.keys

    print(
        f"sparkpoint demo: keyed count of {n:,} events over {keys:,} keys, "
        f"parallelism {args.parallelism}, {args.backend} state, checkpoints in {ckpt_dir}"
    )
    if multi:
        _private_spark_home(work)
        print(f"Starting Spark on {args.master}")
        spark = get_spark_session(args.master)
    else:
        print("Starting local Spark (no task retries: a failure must be recovered by sparkpoint)")
        spark = get_spark_session(args.master or f"local[{max(2, args.parallelism)}]")

    conf = Configuration()
    conf.set_string("sparkpoint.epoch.max-records-per-split", str(max(1000, n // 20)))
    conf.set_string("sparkpoint.local-state.dir", os.path.join(work, "local-state"))
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(args.parallelism)
    env.enable_checkpointing(500, CheckpointingMode.EXACTLY_ONCE)
    env.get_checkpoint_config().set_checkpoint_storage(FileSystemCheckpointStorage(ckpt_dir))
    env.set_state_backend(
        EmbeddedRocksDBStateBackend(True) if args.backend == "rocksdb" else HashMapStateBackend()
    )
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 1000))

    epochs_expected = max(1, n // max(1000, n // 20) // 2)
    kill = FailureInjector(os.path.join(work, "failures"), at_record=n * 3 // 5, mode="kill")
    killed: list[str] = []
    if args.fault == "executor":
        app_id = spark.sparkContext.applicationId

        def kill_holder(event: EpochStart) -> None:
            if killed or event.epoch < epochs_expected // 2:
                return
            executor = event.placement["count"][0]
            killed.append(executor)
            print(f"  !! killing executor {executor} (holds subtask 0 of count) in epoch "
                  f"{event.epoch}", flush=True)
            threading.Timer(0.2, kill_executor, (app_id, executor)).start()

        env.set_fault_injection(Faults().on_epoch_start(kill_holder))
    (
        env.from_source(NumberSequenceSource(0, n - 1), None, "numbers")
        .uid("numbers")
        .map(lambda x: (x % keys, x))
        .uid("pair")
        .key_by(lambda p: p[0])
        .process(CountAndEcho(kill if args.fault == "worker" else None))
        .uid("count")
        .sink_to(FileSink.for_row_format(out_dir, Encoder.simple_string_encoder()).build())
        .uid("sink")
    )
    client = env.execute_async("sparkpoint-demo")
    shown_checkpoints = shown_epochs = 0
    while not client.get_job_execution_result().done():
        time.sleep(0.3)
        for report in client.get_epoch_reports()[shown_epochs:]:
            print(f"  {report.describe()}", flush=True)
            shown_epochs += 1
        stats = client.get_checkpoint_statistics()
        for s in stats[shown_checkpoints:]:
            if s.status == "IN_PROGRESS":
                break
            print(
                f"    checkpoint {s.checkpoint_id:>3} {s.status:<9} epoch {s.epoch:>3} "
                f"{s.duration_ms:>5} ms  state {s.state_size:>9,} B "
                f"({s.inline_bytes:,} B inline, {s.files_written} files)"
            )
            shown_checkpoints += 1
    try:
        result = client.wait()
    except Exception as exc:
        print(f"Job failed: {exc}", file=sys.stderr)
        return 1

    recs, finals = expected_keyed_count_output(n, keys)
    out = _read_output(out_dir)
    echoed = [o for o in out if o[0] == "rec"]
    got_final = {o[1]: (o[2], o[3]) for o in out if o[0] == "final"}
    for report in result.epoch_reports[shown_epochs:]:
        print(f"  {report.describe()}")
    completed = [s for s in result.checkpoints if s.status == "COMPLETED"]
    fault = (f"a SIGKILL of executor {killed[0]}" if killed
             else f"{kill.fired()} SIGKILL(s) of a Python worker")
    print(
        f"\nJob finished in {result.net_runtime_ms / 1000:.1f}s: {result.epochs} epochs, "
        f"{len(completed)} checkpoints; after {fault}: {len(result.failovers)} whole-job "
        f"failover(s), {len(result.subtask_restores)} subtask restore(s)."
    )
    for restore in result.subtask_restores:
        print(f"  subtask {restore.operator_id}#{restore.subtask} restored alone on executor "
              f"{restore.executor_id} in epoch {restore.epoch} ({restore.cause})")
    if args.fault == "executor":
        recovered = bool(killed) and not result.failovers and bool(result.subtask_restores)
    else:
        recovered = kill.fired() == 1 and result.restarts >= 1
    ok = (
        recovered
        and len(echoed) == n
        and set(echoed) == recs
        and got_final == finals
    )
    print(
        f"Output records: {len(echoed):,} (expected {n:,}, duplicates "
        f"{len(echoed) - len(set(echoed)):,}); final counts for {len(got_final):,} keys."
    )
    print("RESULT: EXACT (exactly-once after recovery)" if ok else "RESULT: WRONG")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
