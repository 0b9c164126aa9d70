"""The ``large`` case: RocksDB at ``--large-keys`` keys with incremental checkpoints (all
retained), a full restore injected after the last data epoch, and what each checkpoint
uploaded against the state; optionally again with changelog checkpoints."""

from __future__ import annotations

import os
import shutil
from typing import Any

from keyed_count.harness import emit
from keyed_count.job import run_sparkpoint
from keyed_count.watchers import CheckpointFiles, RssSampler


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
    sampler = RssSampler()
    os.makedirs(os.path.join(work, "large", "ckpt"), exist_ok=True)
    watcher = CheckpointFiles(os.path.join(work, "large", "ckpt"))
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


def run(spark: Any, args: Any, work: str) -> None:
    """Emit ``large_state``, then one ``large_state_changelog`` line per
    ``--large-changelog-materialize-ms`` value (uploads measured against the first run's
    state by epoch)."""
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
