"""The ``standard`` case: the keyed count with and without checkpoints (alternated, the
median of each), its windowed variant and the Spark ``groupBy().count()`` baseline on
``local[2]``; with checkpoints on the cluster; then cluster against ``local[2]``."""

from __future__ import annotations

import os
from typing import Any

from keyed_count.harness import emit, median_run, public, run_spark_groupby
from keyed_count.job import run_sparkpoint

# (master, keys, backend) -> the median checkpointed run, for ``cluster_vs_local``
Checkpointed = dict[tuple[str, int, str], dict[str, Any]]


def _alternated(
    spark: Any, args: Any, work: str, keys: int, backend: str, local: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``--repeats`` runs with checkpoints (and, on ``local[2]``, as many without),
    alternated: one run on this machine varies by ~10%, so the median of each counts."""
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
    return nos, cks


def _windowed(spark: Any, args: Any, work: str, common: dict[str, Any], ck: dict[str, Any]) -> None:
    """Emit the windowed variant's line, against the keyed count's checkpointed median."""
    win = run_sparkpoint(
        spark,
        args.events,
        common["keys"],
        common["backend"],
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
            "vs_keyed_count_ckpt": round(win["events_per_s"] / ck["events_per_s"], 3),
        }
    )


def _summary(
    common: dict[str, Any],
    no: dict[str, Any],
    ck: dict[str, Any],
    base: dict[str, Any],
    floor: float,
) -> None:
    """Emit the ``summary`` line: checkpoint overhead, ratio to Spark, epoch latency."""
    emit(
        {
            "bench": "summary",
            **common,
            "checkpoint_overhead": round(1 - ck["events_per_s"] / no["events_per_s"], 3),
            "ckpt_vs_spark_groupby": round(ck["events_per_s"] / base["events_per_s"], 3),
            "epoch_ms_avg": ck["epoch_ms_avg"],
            "empty_spark_job_ms": floor,
            "epoch_latency_over_empty_job": round(ck["epoch_ms_avg"] / floor, 1),
        }
    )


def run(
    spark: Any, args: Any, work: str, master: str, floor: float, checkpointed: Checkpointed
) -> None:
    """Every ``--keys`` x ``--backends`` configuration on ``master``; records each median
    checkpointed run in ``checkpointed``. ``floor``: the empty Spark job's milliseconds."""
    local = master == "local[2]"
    for keys in args.keys:
        base = run_spark_groupby(spark, args.events, keys) if local else None
        if base is not None:
            emit({"bench": "spark_groupby", "events": args.events, "keys": keys, **base})
        for backend in args.backends:
            common = {"master": master, "backend": backend, "events": args.events, "keys": keys}
            nos, cks = _alternated(spark, args, work, keys, backend, local)
            no = None
            if local:
                no = median_run(nos)
                emit(
                    {
                        "bench": "sparkpoint_nockpt",
                        **common,
                        **public(no),
                        "runs_events_per_s": [r["events_per_s"] for r in nos],
                    }
                )
            ck = median_run(cks)
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
                _windowed(spark, args, work, common, ck)
            if no is not None and base is not None:
                _summary(common, no, ck, base, floor)


def cluster_vs_local(args: Any, checkpointed: Checkpointed) -> None:
    """Emit one ``cluster_vs_local`` line per configuration: the cluster's checkpointed
    throughput over ``local[2]``'s, with the cluster's failovers, restores and misplaced
    keyed tasks."""
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
