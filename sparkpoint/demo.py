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
input implies. The terminal shows a progress bar, the faults and recoveries, and a summary;
Spark's own output and the stack traces of the injected fault go to a log file the summary
names.
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
from typing import Any, TextIO

from sparkpoint.demo_console import Progress, TerminalLog

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


def _position(reports: list[Any], epoch_of_checkpoint: dict[int, int]) -> int:
    """Records of the input the job has gone through (a failover rewinds to its checkpoint)."""
    after_epoch: dict[int, int] = {}
    position = 0
    for report in reports:
        if report.failover is not None:
            cp = report.failover.checkpoint_id
            position = after_epoch.get(epoch_of_checkpoint.get(cp, 0), 0) if cp else 0
        position += report.records_in
        after_epoch[report.epoch] = position
    return position


def _kib(n: int) -> str:
    return f"{n / 1024:,.0f} KiB" if n >= 10_240 else f"{n:,} B"


class _Watch:
    """Turns what the job client reports into progress and event lines."""

    def __init__(self, client: Any, progress: Progress, kill: Any) -> None:
        self.client = client
        self.progress = progress
        self.kill = kill
        self.seen_epochs = 0
        self.kills_shown = 0
        self.messages: list[str] = []  # from the driver's fault hook (another thread)

    def poll(self, final: bool = False) -> None:
        reports = self.client.get_epoch_reports()
        stats = self.client.get_checkpoint_statistics()
        while self.messages:
            self.progress.event(self.messages.pop(0))
        fired = self.kill.fired()
        if fired > self.kills_shown:
            self.kills_shown = fired
            self.progress.event(
                "  !! a Python worker was killed with SIGKILL mid-epoch "
                "(Spark may not retry: sparkpoint must recover)"
            )
        for report in reports[self.seen_epochs :]:
            if report.failover is not None:
                f = report.failover
                source = f"checkpoint {f.checkpoint_id}" if f.checkpoint_id else "the start"
                self.progress.event(
                    f"  -> epoch {f.epoch} failed; whole-job failover to {source}, "
                    f"epoch {report.epoch} ran from there"
                )
            for r in report.subtask_restores:
                self.progress.event(
                    f"  -> subtask {r.operator_id}#{r.subtask} restored alone on executor "
                    f"{r.executor_id} in epoch {r.epoch} (checkpoint + {r.changelog_entries} "
                    f"changelog epochs, {r.seconds:.2f}s)"
                )
        self.seen_epochs = len(reports)
        completed = [s for s in stats if s.status == "COMPLETED"]
        done = _position(reports, {s.checkpoint_id: s.epoch for s in completed})
        detail = f"epoch {reports[-1].epoch if reports else 0}, {len(completed)} checkpoint(s)"
        if final:
            self.progress.finish(done, detail)
        else:
            self.progress.update(done, detail)


def _summary(out: TextIO, result: Any, fault: str, log_path: str, ckpt_dir: str) -> None:
    completed = [s for s in result.checkpoints if s.status == "COMPLETED"]
    failed = [s for s in result.checkpoints if s.status == "FAILED"]
    print("\nSummary", file=out)
    print(
        f"  run time      {result.net_runtime_ms / 1000:.1f}s, {result.epochs} epochs, "
        f"{result.records_in:,} records read",
        file=out,
    )
    if completed:
        durations = [s.duration_ms for s in completed]
        last = completed[-1]
        print(
            f"  checkpoints   {len(completed)} completed, {len(failed)} aborted; "
            f"{min(durations)}-{max(durations)} ms; the last ({last.checkpoint_id}, epoch "
            f"{last.epoch}): {_kib(last.state_size)} state, {_kib(last.inline_bytes)} inline, "
            f"{last.files_written} files",
            file=out,
        )
    else:
        print(f"  checkpoints   none completed, {len(failed)} aborted", file=out)
    print(f"  fault         {fault}", file=out)
    restores = result.subtask_restores
    print(
        f"  recovery      {len(result.failovers)} whole-job failover(s), "
        f"{len(restores)} subtask restore(s)",
        file=out,
    )
    print(f"  log           {log_path} (Spark's output, the fault's stack traces)", file=out)
    print(
        f"  storage       {ckpt_dir} (checkpoints are removed when the job finishes, as in Flink)",
        file=out,
    )


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns 0 when the recovered result is exact."""
    parser = argparse.ArgumentParser(prog="sparkpoint demo", description=__doc__)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    parser.add_argument("--backend", choices=["hashmap", "rocksdb"], default="rocksdb")
    parser.add_argument(
        "--master",
        default=None,
        help="Spark master (default local[P]; e.g. local-cluster[3,1,1024])",
    )
    parser.add_argument("--fault", choices=["worker", "executor"], default="worker")
    parser.add_argument(
        "--dashboard",
        action="store_true",
        help="serve the job's dashboard on 127.0.0.1 while it runs",
    )
    args = parser.parse_args(argv)
    multi = bool(args.master) and not args.master.startswith("local[")
    if args.fault == "executor" and not multi:
        parser.error(
            "--fault executor needs a multi-executor --master, e.g. local-cluster[3,1,1024]"
        )
    work = args.dir or tempfile.mkdtemp(prefix="sparkpoint-demo-")
    for sub in ("checkpoints", "output", "failures"):
        shutil.rmtree(os.path.join(work, sub), ignore_errors=True)
    log_path = os.path.join(work, "demo.log")
    terminal = TerminalLog(log_path)
    try:
        return _run(args, multi, work, terminal.out, log_path)
    finally:
        terminal.restore()


def _run(args: argparse.Namespace, multi: bool, work: str, out: TextIO, log_path: str) -> int:
    from sparkpoint.runtime.spark.session import get_spark_session, prepare_environment

    prepare_environment()
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("sparkpoint.job").setLevel(logging.DEBUG)
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

    ckpt_dir = os.path.join(work, "checkpoints")
    out_dir = os.path.join(work, "output")
    n, keys = args.events, args.keys

    print(
        f"sparkpoint demo: keyed count of {n:,} events over {keys:,} keys, "
        f"parallelism {args.parallelism}, {args.backend} state",
        file=out,
    )
    print(f"  checkpoints in {ckpt_dir}; Spark's log in {log_path}", file=out)
    if multi:
        _private_spark_home(work)
        print(f"Starting Spark on {args.master} ...", file=out)
        spark = get_spark_session(args.master)
    else:
        print(
            "Starting local Spark (no task retries: a failure must be recovered by sparkpoint) ...",
            file=out,
        )
        spark = get_spark_session(args.master or f"local[{max(2, args.parallelism)}]")

    conf = Configuration()
    conf.set_string("sparkpoint.epoch.max-records-per-split", str(max(1000, n // 20)))
    conf.set_string("sparkpoint.local-state.dir", os.path.join(work, "local-state"))
    if args.dashboard:
        conf.set_string("sparkpoint.dashboard.enabled", "true")
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
    messages: list[str] = []
    if args.fault == "executor":
        app_id = spark.sparkContext.applicationId

        def kill_holder(event: EpochStart) -> None:
            if killed or event.epoch < epochs_expected // 2:
                return
            executor = event.placement["count"][0]
            killed.append(executor)
            messages.append(
                f"  !! killing executor {executor} (holds subtask 0 of count) "
                f"with SIGKILL in epoch {event.epoch}"
            )
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
    if client.get_dashboard_url():
        print(f"Dashboard: {client.get_dashboard_url()}", file=out)
    watch = _Watch(client, Progress(out, n), kill)
    watch.messages = messages
    while not client.get_job_execution_result().done():
        time.sleep(0.2)
        watch.poll()
    watch.poll(final=True)
    try:
        result = client.wait()
    except Exception as exc:
        logging.getLogger(__name__).error("The job failed", exc_info=exc)
        print(f"Job failed: {str(exc).splitlines()[0][:300]} (details in {log_path})", file=out)
        return 1

    recs, finals = expected_keyed_count_output(n, keys)
    output = _read_output(out_dir)
    echoed = [o for o in output if o[0] == "rec"]
    got_final = {o[1]: (o[2], o[3]) for o in output if o[0] == "final"}
    fault = (
        f"SIGKILL of executor {killed[0]}"
        if killed
        else f"{kill.fired()} SIGKILL(s) of a Python worker"
    )
    _summary(out, result, fault, log_path, ckpt_dir)
    if args.fault == "executor":
        recovered = bool(killed) and not result.failovers and bool(result.subtask_restores)
    else:
        recovered = kill.fired() == 1 and result.restarts >= 1
    ok = recovered and len(echoed) == n and set(echoed) == recs and got_final == finals
    print(
        f"  output        {len(echoed):,} records (expected {n:,}, duplicates "
        f"{len(echoed) - len(set(echoed)):,}); final counts for {len(got_final):,} keys",
        file=out,
    )
    print("RESULT: EXACT (exactly-once after recovery)" if ok else "RESULT: WRONG", file=out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
