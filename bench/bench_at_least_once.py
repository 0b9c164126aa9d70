"""Output latency of AT_LEAST_ONCE against EXACTLY_ONCE (the baseline, same run).

numbers -> map -> FileSink at parallelism 1, ``--per-epoch`` records per epoch, checkpoints
every ``--interval-ms`` on the local filesystem, ``local[2]``. At the start of every epoch
(on the driver) the committed part files are read; a record's *publish delay* is the time
from the end of the epoch that produced it (the start of the next epoch) to the first
observation in which it is visible (the end of the job for whatever only the final commit
publishes). The resolution is one observation per epoch: a delay of 0 means "visible when
the next epoch starts". Prints one JSON line per mode: the delay's median, p95 and max, the
median epoch, the job's wall time, and the epochs and checkpoints it ran. Every record is
checked to be published exactly once (no failure is injected).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _visible(out: str) -> list[int]:
    values: list[int] = []
    if not os.path.isdir(out):
        return values
    for name in os.listdir(out):
        path = os.path.join(out, name)
        if not name.startswith(".") and os.path.isfile(path):
            with open(path) as f:
                values.extend(int(line) for line in f if line.strip())
    return values


def run(
    spark: Any, mode_name: str, n: int, per_epoch: int, interval_ms: int, work: str
) -> dict[str, Any]:
    from sparkpoint.common import Configuration, Encoder
    from sparkpoint.connectors.number_seq import NumberSequenceSource
    from sparkpoint.datastream import CheckpointingMode, StreamExecutionEnvironment
    from sparkpoint.datastream.connectors.file_system import FileSink
    from sparkpoint.testing import EpochStart, Faults

    shutil.rmtree(work, ignore_errors=True)
    out = os.path.join(work, "out")
    conf = Configuration().set_string("sparkpoint.epoch.max-records-per-split", str(per_epoch))
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(1)
    env.enable_checkpointing(interval_ms, CheckpointingMode[mode_name])
    env.get_checkpoint_config().set_checkpoint_storage_dir(f"file://{work}/ckpt")
    epoch_start: dict[int, float] = {}
    first_seen: dict[int, float] = {}

    def observe(event: EpochStart) -> None:
        now = time.perf_counter()
        epoch_start.setdefault(event.epoch, now)
        for value in _visible(out):
            first_seen.setdefault(value, now)

    env.set_fault_injection(Faults().on_epoch_start(observe))
    (
        env.from_source(NumberSequenceSource(0, n - 1), None, "numbers")
        .map(lambda x: x)
        .sink_to(FileSink.for_row_format(out, Encoder.simple_string_encoder()).build())
    )
    t0 = time.perf_counter()
    result = env.execute(f"bench-{mode_name}")
    end = time.perf_counter()
    published = _visible(out)
    assert sorted(published) == list(range(n)), "every record published exactly once"
    delays = []
    for value in range(n):
        produced_in = value // per_epoch + 1
        epoch_end = epoch_start.get(produced_in + 1, end)
        delays.append((first_seen.get(value, end) - epoch_end) * 1000)
    delays.sort()
    return {
        "bench": "sink_publish_delay",
        "mode": mode_name,
        "records": n,
        "per_epoch": per_epoch,
        "checkpoint_interval_ms": interval_ms,
        "delay_ms_median": round(statistics.median(delays), 1),
        "delay_ms_p95": round(delays[int(0.95 * (n - 1))], 1),
        "delay_ms_max": round(delays[-1], 1),
        "epoch_ms_median": round(
            statistics.median(
                (epoch_start[e + 1] - epoch_start[e]) * 1000
                for e in epoch_start
                if e + 1 in epoch_start
            ),
            1,
        ),
        "wall_s": round(end - t0, 2),
        "epochs": len(result.epoch_reports),
        "checkpoints": sum(1 for r in result.epoch_reports if r.checkpoint_id is not None),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--per-epoch", type=int, default=1_000)
    parser.add_argument("--interval-ms", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from sparkpoint.runtime.spark.session import get_spark_session

    spark = get_spark_session("local[2]")
    work = tempfile.mkdtemp(prefix="bench-alo-")
    try:
        for _ in range(args.repeat):
            for mode in ("EXACTLY_ONCE", "AT_LEAST_ONCE"):  # baseline first
                record = run(spark, mode, args.records, args.per_epoch, args.interval_ms, work)
                print(json.dumps(record), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
