"""Python workers SIGKILLed every few seconds through a long keyed count: how many kills cost
a whole-job restart.

A bounded job (``--events`` numbers, keyed by ``x % --keys``, counted and summed per key in
ValueState by ``CountAndEcho``, checkpoints every second, exactly-once file sink of the final
counts) runs on ``local-cluster[2,1,1024]`` with ``spark.task.maxFailures`` 4, while a thread
SIGKILLs one running Python worker (a process forked by ``pyspark.daemon``) every
``--every`` seconds. A killed worker's task is retried by Spark, in every epoch mode (in
long-running tasks, the default ``auto`` mode's here, the driver orders the retried task
the groups its lost attempt left unfinished); a whole-job restart (failover to the latest
checkpoint) happens only when one task group fails ``spark.task.maxFailures`` times in an
epoch, or (long-running tasks) when the whole run is lost. Prints one JSON line: kills,
restarts, epochs and (long-running) groups run again, the final counts checked key by key.
Not run by CI; run it under the shared lock:
``flock /tmp/sparkpoint-heavy.lock python scripts/worker_kill_soak.py``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _cmdline(pid: int) -> bytes:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read()


def python_workers() -> list[int]:
    """Pids of the Python workers: processes forked by a ``pyspark.daemon``."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            if b"pyspark.daemon" not in _cmdline(pid):
                continue
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if b"pyspark.daemon" in _cmdline(ppid):
                out.append(pid)
        except (OSError, ValueError, IndexError):
            continue
    return out


class _Counted(logging.Handler):
    """Counts the long-running runner's warnings of groups run again."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.groups = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "run again in its next attempt" in record.getMessage():
            self.groups += int(record.args[3]) if isinstance(record.args, tuple) else 1


class Killer(threading.Thread):
    """SIGKILLs a random Python worker every ``every`` seconds until stopped."""

    def __init__(self, every: float, seed: int) -> None:
        super().__init__(daemon=True, name="worker-killer")
        self.every = every
        self.rng = random.Random(seed)
        self.kills = 0
        self._stopping = threading.Event()

    def run(self) -> None:
        while not self._stopping.wait(self.every):
            workers = python_workers()
            if not workers:
                continue
            try:
                os.kill(self.rng.choice(workers), signal.SIGKILL)
                self.kills += 1
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        self._stopping.set()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=4_000_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--every", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--epoch-mode", choices=["auto", "job", "long-running"], default="auto")
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])
    from sparkpoint.common import Configuration, Encoder, RestartStrategies
    from sparkpoint.connectors.number_seq import NumberSequenceSource
    from sparkpoint.datastream import (
        FileSystemCheckpointStorage,
        HashMapStateBackend,
        StreamExecutionEnvironment,
    )
    from sparkpoint.datastream.connectors.file_system import FileSink
    from sparkpoint.runtime.spark.session import get_spark_session
    from sparkpoint.testing import CountAndEcho
    from tests.fixtures.spark_cluster import spark_home
    from tests.runtime.jobs.reference import read_sink

    work = tempfile.mkdtemp(prefix="sparkpoint-worker-kills-")
    os.environ["SPARK_HOME"] = spark_home(work)
    keys = args.keys
    try:
        spark = get_spark_session("local-cluster[2,1,1024]", {"spark.task.maxFailures": "4"})
        conf = Configuration()
        conf.set_string("sparkpoint.epoch.mode", args.epoch_mode)
        env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
        env.set_parallelism(2)
        env.enable_checkpointing(1000)
        env.get_checkpoint_config().set_checkpoint_storage(
            FileSystemCheckpointStorage(os.path.join(work, "ckpt"))
        )
        env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1000, 0))
        env.set_state_backend(HashMapStateBackend())
        out = os.path.join(work, "out")
        (
            env.from_source(NumberSequenceSource(0, args.events - 1), None, "numbers")
            .map(lambda x: (x % keys, x))
            .key_by(lambda kv: kv[0])
            .process(CountAndEcho())
            .filter(lambda row: row[0] == "final")
            .sink_to(FileSink.for_row_format(out, Encoder.simple_string_encoder()).build())
        )
        counted = _Counted()
        logging.getLogger("sparkpoint.runtime.spark.long_running").addHandler(counted)
        killer = Killer(args.every, args.seed)
        killer.start()
        started = time.monotonic()
        try:
            result = env.execute("worker-kills")
        finally:
            killer.stop()
            killer.join()
        seconds = time.monotonic() - started
        finals = {o[1]: (o[2], o[3]) for o in read_sink(out) if o[0] == "final"}
        expected: dict[int, tuple[int, int]] = {}
        for k in range(keys):
            xs = range(k, args.events, keys)
            expected[k] = (len(xs), sum(xs))
        summary: dict[str, Any] = {
            "epoch_mode": args.epoch_mode,
            "events": args.events,
            "seconds": round(seconds, 1),
            "kill_every_s": args.every,
            "kills": killer.kills,
            "restarts": result.restarts,
            "failovers": len(result.failovers),
            "epochs": result.epochs,
            "epochs_run_again": sum(1 for e in result.epoch_reports if e.runs > 1),
            "groups_run_again": counted.groups,
            "exact": finals == expected,
        }
        print(json.dumps(summary), flush=True)
        spark.stop()
        return 0 if summary["exact"] and killer.kills > 0 else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
