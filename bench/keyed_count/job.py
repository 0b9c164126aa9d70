"""The keyed count every case runs (numbers -> (x % K, 1) -> key_by -> a counting
KeyedProcessFunction, or its windowed variant), timed, with what the job reported."""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream.functions import KeyedProcessFunction
from sparkpoint.runtime.operators.context import MAX_WATERMARK


class CountPerKey(KeyedProcessFunction):
    """Counts records per key in ValueState; emits (key, count) when the input ends."""

    def open(self, runtime_context: Any) -> None:
        from sparkpoint.common.typeinfo import Types
        from sparkpoint.datastream.state import ValueStateDescriptor

        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value: Any, ctx: Any) -> None:
        c = self.count.value()
        if c is None:
            c = 0
            ctx.timer_service().register_event_time_timer(MAX_WATERMARK)
        self.count.update(c + value[1])

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield ctx.get_current_key(), self.count.value()


class EventTimeIsX(TimestampAssigner):
    """Timestamp assigner of the windowed variant: the record's number is its event time."""

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[3])


# sparkpoint.epoch.mode of every job (``bench_keyed_count.py --epoch-mode``); None: default
EPOCH_MODE: str | None = None


def _add_counts(a: Any, b: Any) -> Any:
    return (a[0], a[1] + b[1], a[2], a[3])


def run_sparkpoint(
    spark: Any,
    n: int,
    keys: int,
    backend: str,
    checkpoint: bool,
    work: str,
    records_per_split: int,
    parallelism: int = 2,
    function: Any = None,
    retain_all: bool = False,
    faults: Any = None,
    windowed: bool = False,
    output_type: Any = None,
    checkpoint_interval_ms: int = 1000,
    materialize_ms: int | None = None,
    upload_rate: str | None = None,
    count_function: Any = None,
) -> dict[str, Any]:
    """One keyed count of ``n`` events over ``keys`` keys (``function`` instead of
    ``CountPerKey``; ``count_function``: a counting function of the same output instead of
    ``CountPerKey``; ``windowed``: the windowed variant): seconds, throughput, whether the
    output is exact, the job's epoch and checkpoint figures, ``_result`` (the job's result,
    not JSON) and ``_client_metrics`` (``JobClient.get_metrics()`` at the end)."""
    from sparkpoint.common import Configuration
    from sparkpoint.connectors.sink import CollectSink
    from sparkpoint.datastream import (
        EmbeddedRocksDBStateBackend,
        FileSystemCheckpointStorage,
        HashMapStateBackend,
        StreamExecutionEnvironment,
    )
    from sparkpoint.datastream.connectors.number_seq import NumberSequenceSource

    shutil.rmtree(work, ignore_errors=True)
    conf = Configuration()
    conf.set_string("sparkpoint.epoch.max-records-per-split", str(records_per_split))
    if EPOCH_MODE is not None:
        conf.set_string("sparkpoint.epoch.mode", EPOCH_MODE)
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(parallelism)
    if faults is not None:
        env.set_fault_injection(faults)
    env.set_state_backend(
        EmbeddedRocksDBStateBackend(True) if backend == "rocksdb" else HashMapStateBackend()
    )
    if checkpoint:
        env.enable_checkpointing(checkpoint_interval_ms)
        env.get_checkpoint_config().set_checkpoint_storage(
            FileSystemCheckpointStorage(os.path.join(work, "ckpt"))
        )
        if retain_all:
            env.get_checkpoint_config().set_num_retained_checkpoints(10_000)
        if materialize_ms is not None:  # changelog checkpoints
            env.enable_changelog_state_backend(True)
            env.configure(
                {"state.backend.changelog.periodic-materialize.interval": f"{materialize_ms} ms"}
            )
            if upload_rate is not None:
                env.configure(
                    {"sparkpoint.state.changelog.materialization.max-upload-rate": upload_rate}
                )
    k = keys
    sink = CollectSink()
    numbers = env.from_source(NumberSequenceSource(0, n - 1), None, "numbers")
    if windowed:
        from sparkpoint.common import Time, WatermarkStrategy
        from sparkpoint.datastream.window import TumblingEventTimeWindows

        size = max(1, n // 4)
        half = max(1, n // 2)
        (
            # Event time x mod n/2: both source splits (halves) advance through the same
            # times, so no record falls behind the watermark of the other split.
            numbers.map(lambda x: (x % k, 1, x, x % half))
            .assign_timestamps_and_watermarks(
                WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
                    EventTimeIsX()
                )
            )
            .key_by(lambda t: t[0])
            .window(TumblingEventTimeWindows.of(Time.milliseconds(size)))
            .reduce(_add_counts)
            .sink_to(sink)
        )
    else:
        mapper = (lambda x: (x % k, 1)) if function is None else (lambda x: (x % k, 1, x))
        (
            numbers.map(mapper, output_type=output_type)
            .key_by(lambda t: t[0])
            .process(function or count_function or CountPerKey())
            .sink_to(sink)
        )
    t0 = time.perf_counter()
    client = env.execute_async("bench")
    result = client.wait()
    seconds = time.perf_counter() - t0
    out = sink.collected
    if windowed:  # one result per key and window
        size, half = max(1, n // 4), max(1, n // 2)
        pairs = len({(x % keys, (x % half) // size) for x in range(n)})
        ok = len(out) == pairs and sum(o[1] for o in out) == n
    elif function is None:
        ok = len(out) == keys and sum(c for _, c in out) == n
    else:
        ok = len(out) == n and len({v for _, v in out}) == n
    stats = [s for s in result.checkpoints if s.status == "COMPLETED"]
    epochs = [e.seconds for e in result.epoch_reports]
    return {
        "seconds": round(seconds, 3),
        "events_per_s": round(n / seconds),
        "exact": ok,
        "epochs": len(epochs),
        "epoch_ms_avg": round(1000 * sum(epochs) / max(1, len(epochs)), 1),
        "checkpoints": len(stats),
        "checkpoint_ms_avg": round(sum(s.duration_ms for s in stats) / max(1, len(stats)), 1),
        "checkpoint_state_bytes_last": stats[-1].state_size if stats else 0,
        "checkpoint_files_last": stats[-1].files_written if stats else 0,
        "changelog_bytes_per_epoch": round(
            sum(e.changelog_bytes for e in result.epoch_reports) / max(1, len(epochs))
        ),
        "failovers": len(result.failovers),
        "subtask_restores": len(result.subtask_restores),
        "keyed_tasks_elsewhere": sum(
            e.keyed_tasks - e.on_preferred_executor for e in result.epoch_reports
        ),
        "_result": result,
        "_client_metrics": client.get_metrics(),
    }
