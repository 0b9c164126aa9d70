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
  (pickled) run: the median of each;
- ``metrics``: the keyed count on the heap without checkpoints, its ``process_element``
  also incrementing a user counter and updating a distribution per record, alternated
  ``--metric-rounds`` times (5; each round in another order) with the plain count and with
  one that registers the same metrics but updates none: the median of each, the overheads
  in percent (the user counter's total and the distribution's count are checked to equal
  the events), and what the two calls add per record in a plain Python loop.
"""

# The harness and the cases are modules of ``bench/keyed_count/`` (one per case); this script
# is the command line and the order the cases run in.

from __future__ import annotations

import argparse
import shutil
import tempfile
from typing import Any

from keyed_count import floor, large, metric_cost, parallelism, standard, timers, typed
from keyed_count import job as keyed_job
from keyed_count.harness import (
    add_warm_up_arguments,
    emit,
    empty_job_ms,
    run_spark_groupby,
    session,
    warm_up,
)


def parse_args() -> Any:
    """The command line (see ``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, nargs="+", default=[1_000, 1_000_000])
    parser.add_argument("--backends", nargs="+", default=["hashmap", "rocksdb"])
    parser.add_argument("--records-per-split", type=int, default=100_000)
    parser.add_argument(
        "--epoch-mode",
        choices=["auto", "job", "long-running"],
        help="sparkpoint.epoch.mode of every sparkpoint job (default: the engine's default)",
    )
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
        choices=["standard", "floor", "timers", "large", "parallelism", "typed", "metrics"],
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
    parser.add_argument(
        "--metric-rounds",
        type=int,
        default=5,
        help="metrics case: rounds of the plain and the metered count (alternated)",
    )
    parser.add_argument("--parallelism", type=int, nargs="+", default=[128])
    parser.add_argument("--parallelism-events", type=int, default=400_000)
    parser.add_argument("--parallelism-epochs", type=int, default=4)
    return parser.parse_args()


def run_cases(spark: Any, args: Any, work: str) -> None:
    """The optional cases on local[2] (floor, timers, large, typed, parallelism, metrics)."""
    if "floor" in args.cases:
        floor.run(args)
    if "timers" in args.cases:
        timers.run(spark, args, work)
    if "large" in args.cases:
        large.run(spark, args, work)
    if "typed" in args.cases:
        typed.run(spark, args, work)
    if "parallelism" in args.cases:
        parallelism.run(spark, args, work)
    if "metrics" in args.cases:
        metric_cost.run(spark, args, work)


def main() -> None:
    """Each master in turn: warm up, time the empty job, run the cases (the optional ones on
    ``local[2]`` only), then compare the cluster with ``local[2]``."""
    args = parse_args()
    keyed_job.EPOCH_MODE = args.epoch_mode
    work = tempfile.mkdtemp(prefix="sparkpoint-bench-")
    masters = ["local[2]", *([args.cluster] if args.cluster else [])]
    checkpointed: standard.Checkpointed = {}
    for master in masters:
        spark = session(master, work)
        local = master == "local[2]"
        run_spark_groupby(spark, args.events, 1_000)
        emit({"bench": "warm_up", "master": master, **warm_up(spark, args, work)})
        floor_ms = empty_job_ms(spark)
        emit({"bench": "empty_spark_job", "master": master, "ms_median": floor_ms})
        if local:
            run_cases(spark, args, work)
        if "standard" in args.cases or not local:
            standard.run(spark, args, work, master, floor_ms, checkpointed)
        spark.stop()
    if args.cluster and "standard" in args.cases:
        standard.cluster_vs_local(args, checkpointed)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
