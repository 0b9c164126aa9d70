"""Keyed count on local[2] and on a multi-executor cluster: sparkpoint with and without
checkpointing vs a plain Spark job.

For each key count (1,000 and 1,000,000 by default) and state backend it runs, in one
process, first on local[2]:

- ``spark_groupby``: ``spark.range(N).groupBy(id % K).count().collect()`` (the plain Spark
  batch job of the same shape);
- ``sparkpoint_nockpt``: numbers -> (x % K, 1) -> key_by -> a counting KeyedProcessFunction
  (ValueState) that emits each key's count when the input ends;
- ``sparkpoint_ckpt``: the same with EXACTLY_ONCE checkpoints every second to the local
  filesystem; runs without and with checkpoints alternate ``--repeats`` times (3) and the
  median run of each is reported, with every run's throughput;
- ``sparkpoint_window_ckpt``: the windowed variant, checkpointed the same way: event time
  ``x mod N/2`` (ms; the two source splits advance through the same times), then key_by ->
  tumbling event-time windows of N/4 ms -> reduce (a count per key and window, emitted as
  each window closes).

Each session first warms up (``warm_up``): the keyed count at full size, with checkpoints,
for ``--warm-up-seconds`` (150) and until its throughput settles (the median of the last
three runs within ``--warm-up-tolerance`` of the three before), emitted as a ``warm_up`` line
with each run's throughput and the seconds the session's JVMs spent compiling (``jcmd``).
HotSpot keeps compiling Spark's code for minutes: on this machine a fresh ``local[2]``
driver compiled for 4.5 s in its first run and still for 0.2-1.0 s per run after ten runs; a
``local-cluster``'s three JVMs (each executor compiles the same code and sees only its share
of the tasks) compiled for 15 s in the first run and came down to ~0.5 s per run only after
about 30 runs. A fixed number of warm-up runs leaves the cluster colder than ``local[2]``,
while a streaming job runs in the steady state. Each session also times an empty Spark job
(two tasks through ``mapInArrow``) as the floor for the per-epoch latency. Then, on
``local-cluster[2,1,1024]`` (two one-core executors with local state of their own: the
same two cores), ``sparkpoint_ckpt`` again, with its
failovers, subtask restores and keyed tasks that ran away from their state, and the
cluster / local[2] throughput ratio. Every result is one JSON line on stdout; counts are
checked to be exact.

``--cases`` adds (each measured in the same session as the standard runs):

- ``floor``: the same user functions (map, key selector, ``process_element`` on a
  dict-backed state and timer service) in a plain Python loop, per core: what the runtime
  costs on top of the user's code;
- ``timers``: N records that each update state and emit, against N records that each
  register an event-time timer whose firing reads the state and emits (the extra cost of N
  timers, registered and fired, against the cost of N records);
- ``large``: RocksDB, ``--large-keys`` keys (10,000,000) and ``--large-events`` events,
  incremental checkpoints every ``--large-checkpoint-interval-ms`` (1 s; all retained):
  throughput, checkpoint duration (and the epochs the longest one spans), bytes uploaded
  per checkpoint against the state size (and, for the checkpoints taken once every key has
  state, the share of the keys each touched and how many upload at most 5% of the state:
  with ``--large-records-per-split 25000`` two epochs touch 1% of 10M keys), a full restore
  (a failure injected after the last data epoch's commit makes the job restore every
  subtask from its latest checkpoint: that epoch's seconds), peak RSS of the executor's
  Python workers; ``--large-changelog-materialize-ms`` runs it again with changelog
  checkpoints (``state.backend.changelog.enabled``) materializing that often (periodic
  materializations in the background, at ``--large-changelog-upload-rate`` per subtask),
  against the first run's state at that epoch: what each checkpoint wrote (its
  ``_metadata`` and changelog entries; a materialization only when it took one itself), the
  adopted background materializations (bytes, seconds), and everything written in each
  checkpoint interval, background materializations included;
- ``parallelism``: the keyed count at each ``--parallelism`` (128 by default; several may
  be given) against the two-stage Spark floor of the same shape (``mapInArrow`` ->
  ``repartition(P)`` -> ``mapInArrow``) run in the same session: per-epoch cost ratio;
- ``typed``: the keyed count without checkpoints, its map declared
  ``output_type=Types.TUPLE([Types.LONG(), Types.LONG()])`` (records converted and range
  checked at the shuffle, as PyFlink's coder does), alternated three times with the untyped
  (pickled) run: the median of each.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

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


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


class EventTimeIsX(TimestampAssigner):
    """Timestamp assigner of the windowed variant: the record's number is its event time."""

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[3])


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
) -> dict[str, Any]:
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
            .process(function if function is not None else CountPerKey())
            .sink_to(sink)
        )
    t0 = time.perf_counter()
    result = env.execute("bench")
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
    }


def warm_up(spark: Any, args: Any, work: str) -> dict[str, Any]:
    """Run the keyed count (1,000 keys, heap, checkpoints) for ``args.warm_up_seconds`` and
    until its throughput settles (the median of the last three runs within
    ``args.warm_up_tolerance`` of the three before), at most ``args.warm_up_max_runs`` runs.
    Each run's JIT compilation time over the session's JVMs is recorded when ``jcmd`` is
    on the PATH."""
    import statistics

    pids = _jvm_pids(spark)
    runs: list[int] = []
    jit: list[float | None] = []
    settled = False
    t0 = time.perf_counter()
    compiled = _jit_seconds(pids)
    while len(runs) < args.warm_up_max_runs and not (
        settled and time.perf_counter() - t0 >= args.warm_up_seconds
    ):
        res = run_sparkpoint(
            spark,
            args.events,
            1_000,
            "hashmap",
            True,
            os.path.join(work, "warm"),
            args.records_per_split,
        )
        runs.append(res["events_per_s"])
        now = _jit_seconds(pids)
        jit.append(None if now is None or compiled is None else round(now - compiled, 2))
        compiled = now
        if len(runs) >= 6:
            last, before = statistics.median(runs[-3:]), statistics.median(runs[-6:-3])
            settled = abs(last - before) <= args.warm_up_tolerance * before
    return {
        "seconds": round(time.perf_counter() - t0, 1),
        "settled": settled,
        "runs_events_per_s": runs,
        "jit_compile_seconds_per_run": jit,
    }


def add_warm_up_arguments(parser: argparse.ArgumentParser) -> None:
    """The options ``warm_up`` reads (every bench that warms up the same way takes them)."""
    parser.add_argument(
        "--warm-up-seconds",
        type=float,
        default=150.0,
        help="warm-up per Spark session at least this long (see warm_up)",
    )
    parser.add_argument(
        "--warm-up-max-runs",
        type=int,
        default=80,
        help="warm-up runs per Spark session at most (see warm_up)",
    )
    parser.add_argument(
        "--warm-up-tolerance",
        type=float,
        default=0.03,
        help="warm-up ends when the last three runs' median is within this share of the "
        "three before",
    )


def _jvm_pids(spark: Any) -> list[int]:
    """The driver's JVM and the JVMs it started (a ``local-cluster``'s executors)."""
    import subprocess

    driver = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    try:
        children = subprocess.run(
            ["ps", "-o", "pid=,comm=", "--ppid", str(driver)],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
    except OSError:  # no ps: the driver alone
        children = ""
    return [
        driver,
        *(int(line.split()[0]) for line in children.splitlines() if line.split()[1:] == ["java"]),
    ]


def _jit_seconds(pids: list[int]) -> float | None:
    """Seconds the JVMs have spent compiling (HotSpot's ``java.ci.totalTime`` counter), or
    None without ``jcmd``."""
    import subprocess

    total = 0.0
    for pid in pids:
        try:
            out = subprocess.run(
                ["jcmd", str(pid), "PerfCounter.print"], capture_output=True, text=True, check=False
            ).stdout
        except OSError:
            return None
        counters = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        if "java.ci.totalTime" not in counters:
            return None
        total += int(counters["java.ci.totalTime"]) / int(counters["sun.os.hrt.frequency"])
    return total


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median throughput (every run must be exact)."""
    ordered = sorted(runs, key=lambda r: r["events_per_s"])
    median = dict(ordered[len(ordered) // 2])
    median["exact"] = all(r["exact"] for r in runs)
    return median


def public(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` without the fields that are not JSON (the job result)."""
    return {k: v for k, v in record.items() if not k.startswith("_")}


class EmitPerRecord(KeyedProcessFunction):
    """Timers case, records side: counts per key and emits (key, record) per record."""

    def open(self, runtime_context: Any) -> None:
        from sparkpoint.common.typeinfo import Types
        from sparkpoint.datastream.state import ValueStateDescriptor

        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value: Any, ctx: Any) -> Any:
        c = self.count.value() or 0
        self.count.update(c + 1)
        yield value[0], value[2]


class EmitPerTimer(EmitPerRecord):
    """Timers case, timers side: counts per key, registers one event-time timer per record
    (its number), and emits (key, timer) when the timer fires."""

    def process_element(self, value: Any, ctx: Any) -> None:
        c = self.count.value() or 0
        self.count.update(c + 1)
        ctx.timer_service().register_event_time_timer(value[2])

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        if self.count.value():
            yield ctx.get_current_key(), timestamp


class _DictValueState:
    def __init__(self, ctx: _FloorContext) -> None:
        self.ctx = ctx
        self.data: dict[Any, Any] = {}

    def value(self) -> Any:
        return self.data.get(self.ctx.key)

    def update(self, v: Any) -> None:
        self.data[self.ctx.key] = v


class _FloorContext:
    """A dict-backed runtime context, keyed context and timer service for the floor."""

    def __init__(self) -> None:
        self.key: Any = None
        self.timers: dict[Any, set[int]] = {}

    def get_state(self, descriptor: Any) -> _DictValueState:
        return _DictValueState(self)

    def timer_service(self) -> _FloorContext:
        return self

    def register_event_time_timer(self, ts: int) -> None:
        self.timers.setdefault(self.key, set()).add(ts)

    def get_current_key(self) -> Any:
        return self.key


def run_python_floor(n: int, keys: int) -> dict[str, Any]:
    """The user functions of the keyed count in a plain loop on one core (no runtime)."""
    ctx = _FloorContext()
    fn = CountPerKey()
    fn.open(ctx)
    k = keys
    mapper = lambda x: (x % k, 1)  # noqa: E731 - the job's own lambdas
    key_of = lambda t: t[0]  # noqa: E731
    t0 = time.perf_counter()
    for x in range(n):
        v = mapper(x)
        ctx.key = key_of(v)
        fn.process_element(v, ctx)
    out = []
    for key in ctx.timers:
        ctx.key = key
        out.extend(fn.on_timer(MAX_WATERMARK, ctx))
    seconds = time.perf_counter() - t0
    ok = len(out) == keys and sum(c for _, c in out) == n
    return {"seconds": round(seconds, 3), "events_per_s_per_core": round(n / seconds), "exact": ok}


def run_timers_case(
    spark: Any, n: int, keys: int, backend: str, work: str, records_per_split: int
) -> dict[str, Any]:
    """N records emitting per record vs N records emitting per fired timer."""
    records = run_sparkpoint(
        spark,
        n,
        keys,
        backend,
        False,
        os.path.join(work, "rec"),
        records_per_split,
        function=EmitPerRecord(),
    )
    timers = run_sparkpoint(
        spark,
        n,
        keys,
        backend,
        False,
        os.path.join(work, "tim"),
        records_per_split,
        function=EmitPerTimer(),
    )
    extra = timers["seconds"] - records["seconds"]
    return {
        "records_seconds": records["seconds"],
        "timers_seconds": timers["seconds"],
        "exact": records["exact"] and timers["exact"],
        "timer_extra_seconds": round(extra, 3),
        "timer_cost_over_record_cost": round(extra / records["seconds"], 3),
    }


class _RssSampler:
    """Peak resident memory of this machine's Spark Python workers (sampled from /proc)."""

    def __init__(self) -> None:
        import threading

        self.peak_worker = 0
        self.peak_workers_total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.wait(0.5):
            total = 0
            for pid in os.listdir("/proc"):
                if not pid.isdigit() or int(pid) == me:
                    continue
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read()
                    if b"pyspark.daemon" not in cmd and b"pyspark/worker" not in cmd:
                        continue
                    with open(f"/proc/{pid}/statm") as f:
                        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
                except (OSError, ValueError, IndexError):
                    continue
                total += rss
                self.peak_worker = max(self.peak_worker, rss)
            self.peak_workers_total = max(self.peak_workers_total, total)

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join()
        return {
            "peak_rss_python_worker_bytes": self.peak_worker,
            "peak_rss_python_workers_total_bytes": self.peak_workers_total,
        }


class _CheckpointFiles:
    """Every file seen under a checkpoint directory while the job runs (a finished job
    deletes its checkpoints), polled once a second: path -> (size, mtime). The ``shared/``
    directories are also polled every 0.2 s for how much their files grew (``growth``:
    time, bytes), which places a file written slowly (a background materialization at a
    bounded rate) in the checkpoint intervals it was written in, not only the last."""

    def __init__(self, root: str) -> None:
        import threading

        self.root = root
        self.files: dict[str, tuple[int, float]] = {}
        self.growth: list[tuple[float, int]] = []
        self._sizes: dict[str, int] = {}
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, daemon=True),
            threading.Thread(target=self._run_shared, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _poll_shared(self) -> None:
        now = time.time()
        try:
            jobs = os.listdir(self.root)
        except OSError:
            return
        for job in jobs:
            try:
                entries = list(os.scandir(os.path.join(self.root, job, "shared")))
            except OSError:
                continue
            for entry in entries:
                try:
                    size = entry.stat().st_size
                except OSError:
                    continue
                grew = size - self._sizes.get(entry.path, 0)
                if grew > 0:
                    self.growth.append((now, grew))
                    self._sizes[entry.path] = size

    def _run_shared(self) -> None:
        while not self._stop.wait(0.2):
            self._poll_shared()

    def _poll(self) -> None:
        for dirpath, _dirs, names in os.walk(self.root):
            for name in names:
                path = os.path.join(dirpath, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                self.files[path] = (st.st_size, st.st_mtime)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self._poll()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def uploaded_per_checkpoint(self) -> list[tuple[int, int, int, int]]:
        """What was written for each checkpoint: its own ``chk-N`` files, the
        ``taskowned/`` (changelog entries) and ``shared/`` files first written after the
        previous checkpoint's ``_metadata`` and before its own (every checkpoint is
        retained), and the growth of ``shared/`` files seen in that time."""
        chks: list[tuple[float, str]] = []
        written: dict[str, list[tuple[float, int]]] = {"shared": [], "taskowned": []}
        own: dict[str, int] = {}
        for path, (size, mtime) in self.files.items():
            parent = os.path.dirname(path)
            if os.path.basename(parent).startswith("chk-"):
                own[parent] = own.get(parent, 0) + size
                if os.path.basename(path) == "_metadata":
                    chks.append((mtime, parent))
            else:
                for kind, files in written.items():
                    if os.sep + kind in parent:
                        files.append((mtime, size))
        chks.sort()
        out: list[tuple[int, int, int, int]] = []
        prev = float("-inf")
        for mtime, parent in chks:
            entries, shared = (
                sum(size for t, size in written[kind] if prev < t <= mtime)
                for kind in ("taskowned", "shared")
            )
            grew = sum(size for t, size in self.growth if prev < t <= mtime)
            out.append((own[parent], entries, shared, grew))
            prev = mtime
        return out


def run_large_case(
    spark: Any,
    n: int,
    keys: int,
    work: str,
    records_per_split: int,
    touched_keys: int,
    checkpoint_interval_ms: int = 1000,
    materialize_ms: int | None = None,
    state_by_epoch: dict[int, int] | None = None,
    upload_rate: str | None = None,
) -> dict[str, Any]:
    """RocksDB at ``keys`` keys with incremental checkpoints; see the module docstring.
    With ``materialize_ms``, changelog checkpoints materializing that often; their state
    size counts the changelog too, so ``state_by_epoch`` (a run without changelog: epoch ->
    state bytes of its checkpoints) gives the state each upload is measured against."""
    import statistics

    from sparkpoint.testing import FailureInjector, Faults

    epochs = -(-n // (2 * records_per_split))
    shutil.rmtree(os.path.join(work, "inject"), ignore_errors=True)  # fires once per run
    injector = FailureInjector(os.path.join(work, "inject"), at_record=epochs, times=1)
    faults = Faults().on_local_commit(
        lambda op, sub, epoch: injector.maybe_fail(epoch) if sub == 0 else None
    )
    sampler = _RssSampler()
    os.makedirs(os.path.join(work, "large", "ckpt"), exist_ok=True)
    watcher = _CheckpointFiles(os.path.join(work, "large", "ckpt"))
    try:
        res = run_sparkpoint(
            spark,
            n,
            keys,
            "rocksdb",
            True,
            os.path.join(work, "large"),
            records_per_split,
            retain_all=True,
            faults=faults,
            checkpoint_interval_ms=checkpoint_interval_ms,
            materialize_ms=materialize_ms,
            upload_rate=upload_rate,
        )
    finally:
        rss = sampler.stop()
        watcher.stop()
    result = res.pop("_result")
    written = watcher.uploaded_per_checkpoint()
    stats = [s for s in result.checkpoints if s.status == "COMPLETED"]
    # With changelog checkpoints, shared/ holds materializations: a checkpoint wrote one
    # itself only when it is the first, or the first after a failover (the bench's entries
    # are files, so no checkpoint materializes for inline bytes); the others' shared files
    # are background materializations, written while the checkpoint ran.
    ids = [s.checkpoint_id for s in stats]
    own_materialization = {0} | {
        next((i for i, c in enumerate(ids) if c > (f.checkpoint_id or 0)), 0)
        for f in result.failovers
    }
    uploads: list[int] = []  # what each checkpoint wrote
    totals: list[int] = []  # everything written meanwhile (background materializations too)
    background: list[int] = []
    for i, (own, entries, shared, grew) in enumerate(written):
        if materialize_ms is None:
            entries = 0  # per-subtask recovery's entries: no checkpoint references them
        # background materializations: their bytes by when they were written
        totals.append(own + entries + (grew if result.materializations else shared))
        if materialize_ms is not None and i not in own_materialization:
            uploads.append(own + entries)
            background.append(grew)
        else:
            uploads.append(own + entries + shared)
    restore_epochs = [e.seconds for e in result.epoch_reports if e.failover is not None]
    normal = [e.seconds for e in result.epoch_reports if e.failover is None]
    sizes = [s.state_size for s in stats]
    if state_by_epoch:  # the state of the same epoch in the run without changelog
        known = sorted(state_by_epoch)
        sizes = [
            state_by_epoch[max((e for e in known if e <= s.epoch), default=known[0])] for s in stats
        ]
    covered = [s.epoch - (stats[i - 1].epoch if i else 0) for i, s in enumerate(stats)]
    # Checkpoints taken once every key has state (the input counts the keys up, epoch by
    # epoch, then again) and before the input ends (the last epoch fires every key's
    # timer): each upload against its own checkpoint's state.
    full = [
        i
        for i, st in enumerate(stats)
        if (st.epoch - covered[i]) * touched_keys >= keys
        and st.epoch * touched_keys <= n
        and i < len(uploads)
    ]
    longest = max(stats, key=lambda s: s.duration_ms, default=None)
    return {
        **res,
        **rss,
        "injected_failures": injector.fired(),
        "checkpoint_ms_max": longest.duration_ms if longest is not None else 0,
        # the epoch that triggered it, and the seconds of each epoch from then on
        "checkpoint_max_epochs_seconds": []
        if longest is None
        else [
            [e.epoch, round(e.seconds, 2)] for e in result.epoch_reports if e.epoch >= longest.epoch
        ][:4],
        "checkpoint_state_bytes_max": max(sizes, default=0),
        "uploaded_bytes_per_checkpoint": uploads,
        "uploaded_over_state_last": round(uploads[-1] / sizes[-1], 4)
        if uploads and sizes
        else None,
        "checkpoint_epochs_covered": covered,
        "checkpoint_epochs": [s.epoch for s in stats],
        "checkpoint_state_bytes_per_checkpoint": sizes,
        "all_keys_checkpoints": len(full),
        "all_keys_keys_touched_per_checkpoint_share": sorted(
            {round(covered[i] * touched_keys / keys, 4) for i in full}
        ),
        "all_keys_checkpoints_uploading_at_most_5pct": sum(
            uploads[i] <= 0.05 * sizes[i] for i in full
        ),
        "all_keys_upload_over_state_median": round(
            statistics.median(uploads[i] / sizes[i] for i in full), 4
        )
        if full
        else None,
        "all_keys_upload_over_state_max": round(
            max((uploads[i] / sizes[i] for i in full), default=0.0), 4
        ),
        # background materializations (changelog checkpoints with an interval): adopted
        # ones, their rate, and the most they wrote in one checkpoint interval (by growth)
        "background_materializations": [
            [m.materialization_id, m.epoch, m.uploaded_bytes, round(m.seconds, 2)]
            for m in result.materializations
        ],
        "background_bytes_per_second": round(
            sum(m.uploaded_bytes for m in result.materializations)
            / max(1e-9, sum(m.seconds for m in result.materializations))
        ),
        "background_bytes_per_checkpoint_max": max(background, default=0),
        "written_bytes_per_checkpoint_interval": totals,
        "all_keys_checkpoints_with_background_at_most_5pct": sum(
            totals[i] <= 0.05 * sizes[i] for i in full
        ),
        "keys_touched_per_epoch_share": round(touched_keys / keys, 4),
        "full_restore_epoch_seconds": restore_epochs,
        "normal_epoch_seconds_avg": round(sum(normal) / max(1, len(normal)), 3),
    }


def run_spark_two_stage_floor(spark: Any, rows: int, parallelism: int, jobs: int) -> float:
    """Seconds per job of ``mapInArrow -> repartition(P) -> mapInArrow`` (no state)."""
    import pyarrow as pa

    def ident(batches: Any) -> Any:
        for b in batches:
            yield pa.RecordBatch.from_pydict({"id": b.column(0)})

    times = []
    for _ in range(jobs):
        t0 = time.perf_counter()
        (
            spark.range(0, rows, 1, 2)
            .mapInArrow(ident, "id long")
            .repartition(parallelism)
            .mapInArrow(ident, "id long")
            .count()
        )
        times.append(time.perf_counter() - t0)
    return sum(times) / len(times)


def run_parallelism_case(
    spark: Any, n: int, keys: int, work: str, parallelism: int, epochs: int
) -> dict[str, Any]:
    """The keyed count (heap) at ``parallelism`` in about ``epochs`` epochs vs the floor."""
    per_split = max(1, -(-n // (parallelism * epochs)))
    floor = run_spark_two_stage_floor(spark, n // epochs, parallelism, epochs)
    res = run_sparkpoint(
        spark,
        n,
        keys,
        "hashmap",
        True,
        os.path.join(work, "par"),
        per_split,
        parallelism=parallelism,
    )
    res.pop("_result")
    return {
        **res,
        "spark_floor_job_ms": round(1000 * floor, 1),
        "epoch_over_floor": round(res["epoch_ms_avg"] / (1000 * floor), 2),
    }


def run_spark_groupby(spark: Any, n: int, keys: int) -> dict[str, Any]:
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    rows = spark.range(0, n, 1, 2).groupBy((F.col("id") % keys).alias("k")).count().collect()
    seconds = time.perf_counter() - t0
    ok = len(rows) == keys and sum(r["count"] for r in rows) == n
    return {"seconds": round(seconds, 3), "events_per_s": round(n / seconds), "exact": ok}


def empty_job_ms(spark: Any, repeats: int = 10) -> float:
    import pyarrow as pa

    def ident(batches: Any) -> Any:
        for b in batches:
            yield pa.RecordBatch.from_pydict({"id": b.column(0)})

    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        spark.range(0, 2, 1, 2).mapInArrow(ident, "id long").collect()
        times.append(time.perf_counter() - t0)
    times.sort()
    return round(1000 * times[len(times) // 2], 1)


def _session(master: str, work: str) -> Any:
    from sparkpoint.runtime.spark.session import get_spark_session

    if master.startswith("local-cluster"):
        # Executor work directories go to the bench's directory, not site-packages.
        import pyspark

        home = os.path.join(work, "spark-home")
        os.makedirs(home, exist_ok=True)
        real = os.path.dirname(pyspark.__file__)
        for name in ("bin", "sbin", "jars", "python", "conf"):
            if os.path.exists(os.path.join(real, name)):
                os.symlink(os.path.join(real, name), os.path.join(home, name))
        os.environ["SPARK_HOME"] = home
    spark = get_spark_session(master)
    if master.startswith("local-cluster"):
        from sparkpoint.runtime.spark.cluster import SparkCluster

        wanted = int(master.split("[", 1)[1].split(",", 1)[0])
        while len(SparkCluster(spark).executor_ids()) < wanted:
            time.sleep(0.2)
    return spark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, nargs="+", default=[1_000, 1_000_000])
    parser.add_argument("--backends", nargs="+", default=["hashmap", "rocksdb"])
    parser.add_argument("--records-per-split", type=int, default=100_000)
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="standard case: runs with and without checkpoints (alternated); medians count",
    )
    parser.add_argument(
        "--cluster",
        default="local-cluster[2,1,1024]",
        help="multi-executor master compared with local[2] ('' to skip)",
    )
    parser.add_argument(
        "--no-windowed",
        dest="windowed",
        action="store_false",
        help="skip the windowed variant (tumbling event-time window + reduce) on local[2]",
    )
    parser.add_argument(
        "--cases",
        nargs="*",
        default=["standard", "floor", "timers"],
        choices=["standard", "floor", "timers", "large", "parallelism", "typed"],
        help="what to run on local[2] (see the module docstring)",
    )
    add_warm_up_arguments(parser)
    parser.add_argument("--timer-events", type=int, default=1_000_000)
    parser.add_argument("--large-keys", type=int, default=10_000_000)
    parser.add_argument("--large-events", type=int, default=20_000_000)
    parser.add_argument(
        "--large-records-per-split",
        type=int,
        default=0,
        help="large case: records per split per epoch (0: --records-per-split)",
    )
    parser.add_argument("--large-checkpoint-interval-ms", type=int, default=1000)
    parser.add_argument(
        "--large-changelog-materialize-ms",
        type=int,
        nargs="*",
        default=[],
        help="large case: run it again with changelog checkpoints materializing this often "
        "(each value a run; uploads measured against the first run's state by epoch)",
    )
    parser.add_argument(
        "--large-changelog-upload-rate",
        default=None,
        help="large case, changelog runs: sparkpoint.state.changelog.materialization."
        "max-upload-rate (e.g. '4 mb'; per subtask and second)",
    )
    parser.add_argument("--parallelism", type=int, nargs="+", default=[128])
    parser.add_argument("--parallelism-events", type=int, default=400_000)
    parser.add_argument("--parallelism-epochs", type=int, default=4)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="sparkpoint-bench-")
    masters = ["local[2]", *([args.cluster] if args.cluster else [])]
    checkpointed: dict[tuple[str, int, str], dict[str, Any]] = {}
    for master in masters:
        spark = _session(master, work)
        local = master == "local[2]"
        run_spark_groupby(spark, args.events, 1_000)
        emit({"bench": "warm_up", "master": master, **warm_up(spark, args, work)})
        floor = empty_job_ms(spark)
        emit({"bench": "empty_spark_job", "master": master, "ms_median": floor})
        if local:
            run_cases(spark, args, work)
        for keys in args.keys if "standard" in args.cases or not local else []:
            base = run_spark_groupby(spark, args.events, keys) if local else None
            if base is not None:
                emit({"bench": "spark_groupby", "events": args.events, "keys": keys, **base})
            for backend in args.backends:
                common = {"master": master, "backend": backend, "events": args.events, "keys": keys}
                # Runs without and with checkpoints alternate, ``--repeats`` times each; the
                # median run of each is reported (one run on this machine varies by ~10%).
                nos: list[dict[str, Any]] = []
                cks: list[dict[str, Any]] = []
                for _ in range(args.repeats):
                    if local:
                        nos.append(
                            run_sparkpoint(
                                spark,
                                args.events,
                                keys,
                                backend,
                                False,
                                os.path.join(work, "no"),
                                args.records_per_split,
                            )
                        )
                    cks.append(
                        run_sparkpoint(
                            spark,
                            args.events,
                            keys,
                            backend,
                            True,
                            os.path.join(work, "ck"),
                            args.records_per_split,
                        )
                    )
                no = None
                if local:
                    no = _median_run(nos)
                    emit(
                        {
                            "bench": "sparkpoint_nockpt",
                            **common,
                            **public(no),
                            "runs_events_per_s": [r["events_per_s"] for r in nos],
                        }
                    )
                ck = _median_run(cks)
                emit(
                    {
                        "bench": "sparkpoint_ckpt",
                        **common,
                        **public(ck),
                        "runs_events_per_s": [r["events_per_s"] for r in cks],
                    }
                )
                checkpointed[(master, keys, backend)] = ck
                if local and args.windowed:
                    win = run_sparkpoint(
                        spark,
                        args.events,
                        keys,
                        backend,
                        True,
                        os.path.join(work, "win"),
                        args.records_per_split,
                        windowed=True,
                    )
                    emit(
                        {
                            "bench": "sparkpoint_window_ckpt",
                            **common,
                            **public(win),
                            "vs_keyed_count_ckpt": round(
                                win["events_per_s"] / ck["events_per_s"], 3
                            ),
                        }
                    )
                if no is not None and base is not None:
                    emit(
                        {
                            "bench": "summary",
                            **common,
                            "checkpoint_overhead": round(
                                1 - ck["events_per_s"] / no["events_per_s"], 3
                            ),
                            "ckpt_vs_spark_groupby": round(
                                ck["events_per_s"] / base["events_per_s"], 3
                            ),
                            "epoch_ms_avg": ck["epoch_ms_avg"],
                            "empty_spark_job_ms": floor,
                            "epoch_latency_over_empty_job": round(ck["epoch_ms_avg"] / floor, 1),
                        }
                    )
        spark.stop()
    if args.cluster and "standard" in args.cases:
        for keys in args.keys:
            for backend in args.backends:
                ck_local = checkpointed[("local[2]", keys, backend)]
                ck_cluster = checkpointed[(args.cluster, keys, backend)]
                emit(
                    {
                        "bench": "cluster_vs_local",
                        "cluster": args.cluster,
                        "backend": backend,
                        "keys": keys,
                        "local_events_per_s": ck_local["events_per_s"],
                        "cluster_events_per_s": ck_cluster["events_per_s"],
                        "ratio": round(ck_cluster["events_per_s"] / ck_local["events_per_s"], 3),
                        "cluster_failovers": ck_cluster["failovers"],
                        "cluster_subtask_restores": ck_cluster["subtask_restores"],
                        "cluster_keyed_tasks_elsewhere": ck_cluster["keyed_tasks_elsewhere"],
                    }
                )
    shutil.rmtree(work, ignore_errors=True)


def run_cases(spark: Any, args: Any, work: str) -> None:
    """The optional cases on local[2] (floor, timers, large, parallelism)."""
    if "floor" in args.cases:
        for keys in args.keys:
            floor = run_python_floor(args.events // 2, keys)
            emit(
                {
                    "bench": "python_floor",
                    "events": args.events // 2,
                    "keys": keys,
                    **floor,
                    "two_cores_events_per_s": 2 * floor["events_per_s_per_core"],
                }
            )
    if "timers" in args.cases:
        for backend in args.backends:
            res = run_timers_case(
                spark,
                args.timer_events,
                args.timer_events // 10,
                backend,
                os.path.join(work, "timers"),
                args.records_per_split,
            )
            emit(
                {
                    "bench": "timers_vs_records",
                    "backend": backend,
                    "events": args.timer_events,
                    "keys": args.timer_events // 10,
                    **res,
                }
            )
    if "large" in args.cases:
        # 2 splits of records-per-split per epoch touch at most that many keys
        split = args.large_records_per_split or args.records_per_split
        res = run_large_case(
            spark,
            args.large_events,
            args.large_keys,
            os.path.join(work, "lg"),
            split,
            2 * split,
            args.large_checkpoint_interval_ms,
        )
        emit(
            {
                "bench": "large_state",
                "backend": "rocksdb",
                "events": args.large_events,
                "keys": args.large_keys,
                "records_per_split": split,
                "checkpoint_interval_ms": args.large_checkpoint_interval_ms,
                **res,
            }
        )
        state_by_epoch = dict(
            zip(res["checkpoint_epochs"], res["checkpoint_state_bytes_per_checkpoint"])
        )
        for every_ms in args.large_changelog_materialize_ms:
            res = run_large_case(
                spark,
                args.large_events,
                args.large_keys,
                os.path.join(work, "lg"),
                split,
                2 * split,
                args.large_checkpoint_interval_ms,
                every_ms,
                state_by_epoch,
                args.large_changelog_upload_rate,
            )
            emit(
                {
                    "bench": "large_state_changelog",
                    "backend": "rocksdb",
                    "events": args.large_events,
                    "keys": args.large_keys,
                    "records_per_split": split,
                    "materialize_ms": every_ms,
                    "upload_rate": args.large_changelog_upload_rate,
                    "checkpoint_interval_ms": args.large_checkpoint_interval_ms,
                    **res,
                }
            )
    if "typed" in args.cases:
        from sparkpoint.common.typeinfo import Types

        pair = Types.TUPLE([Types.LONG(), Types.LONG()])
        for keys in args.keys:
            for backend in args.backends:
                # alternated three times (the machine is shared): the median of each
                rates: dict[str, list[int]] = {"untyped": [], "typed": []}
                exact = True
                for _ in range(3):
                    for name, out_type in (("untyped", None), ("typed", pair)):
                        r = run_sparkpoint(
                            spark,
                            args.events,
                            keys,
                            backend,
                            False,
                            os.path.join(work, "typed"),
                            args.records_per_split,
                            output_type=out_type,
                        )
                        rates[name].append(r["events_per_s"])
                        exact = exact and r["exact"]
                median = {name: sorted(v)[1] for name, v in rates.items()}
                emit(
                    {
                        "bench": "typed_records",
                        "backend": backend,
                        "events": args.events,
                        "keys": keys,
                        "exact": exact,
                        **{f"{name}_events_per_s": m for name, m in median.items()},
                        **{f"{name}_runs": v for name, v in rates.items()},
                        "typed_over_untyped": round(median["typed"] / median["untyped"], 3),
                    }
                )
    for parallelism in args.parallelism if "parallelism" in args.cases else []:
        res = run_parallelism_case(
            spark,
            args.parallelism_events,
            1_000,
            os.path.join(work, "par"),
            parallelism,
            args.parallelism_epochs,
        )
        emit(
            {
                "bench": "parallelism",
                "parallelism": parallelism,
                "events": args.parallelism_events,
                "keys": 1_000,
                **res,
            }
        )


if __name__ == "__main__":
    main()
