"""How many records an epoch may hold to end within ``sparkpoint.epoch.target-duration``.

An epoch's duration (from its planning to its acceptance) is fitted over recent epochs as a
fixed cost plus a cost per record. The fixed cost (a Spark job per epoch in the ``job``
mode, the relays and the checkpoint in ``long-running``) cannot be cut by smaller epochs, so
only the part above it is sized: records that would take longer than the target to process
start the next epoch early, and when the fixed cost alone reaches the target nothing does.
Under steady heavy input epochs then last about the target, or, nearer the job's maximum,
run back to back (each about the fixed cost over the share of capacity left), instead of
each holding a whole epoch interval of input; so the epoch carrying a checkpoint ends soon
after the checkpoint is due (a Flink record waits for the checkpoint interval plus an
alignment of ~ms; ours for the interval plus the epoch carrying it).
"""

from __future__ import annotations

from collections import deque

__all__ = ["EpochCosts"]

_WINDOW = 32  # epochs fitted
_SPREAD = 1.5  # the largest epoch fitted holds this many times the smallest's records


class EpochCosts:
    """A least-squares fit of epoch duration = fixed + per_record * records over the latest
    epochs that read records. The fit needs epochs of different sizes; until there are
    some (steady input gives epochs of one size), ``probe_records`` asks for one."""

    def __init__(self, target_ms: int) -> None:
        self.target_ms = target_ms
        self._samples: deque[tuple[int, float]] = deque(maxlen=_WINDOW)
        self.fixed_ms: float | None = None  # the latest fit, kept while epochs are alike
        self.ms_per_record: float | None = None
        self.last_records = 0
        self.last_ms = 0.0

    def observe(self, records: int, duration_ms: float) -> None:
        """An epoch that read ``records`` records took ``duration_ms``."""
        if records <= 0:
            return
        self.last_records, self.last_ms = records, duration_ms
        self._samples.append((records, duration_ms))
        sizes = [n for n, _ in self._samples]
        if max(sizes) < _SPREAD * min(sizes):
            return
        count = len(self._samples)
        mean_n = sum(sizes) / count
        mean_d = sum(d for _, d in self._samples) / count
        var = sum((n - mean_n) ** 2 for n in sizes)
        cov = sum((n - mean_n) * (d - mean_d) for n, d in self._samples)
        slope = cov / var
        self.ms_per_record = slope if slope > 0 else 0.0
        self.fixed_ms = mean_d - self.ms_per_record * mean_n

    def records_within_target(self) -> int | None:
        """Records one epoch may hold to end within the target; None when the fit does not
        tell (not made yet, or the fixed cost alone reaches the target: smaller epochs
        would only add fixed costs)."""
        if self.fixed_ms is None or self.ms_per_record is None:
            return None
        if self.ms_per_record <= 0 or self.fixed_ms >= self.target_ms:
            return None
        return max(1, int((self.target_ms - self.fixed_ms) / self.ms_per_record))

    def probe_records(self) -> int | None:
        """With no fit yet, after an epoch longer than twice the target: the records of an
        epoch half its size, whose duration separates the fixed cost from the cost per
        record. (Shorter epochs are left alone: at most one probe, and only where sizing
        would pay.)"""
        if self.fixed_ms is not None or self.last_ms <= 2 * self.target_ms:
            return None
        if self.last_records < 2:
            return None
        return max(1, self.last_records // 2)
