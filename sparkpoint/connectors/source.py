"""Replayable sources: splits with positions, read one bounded range per epoch.

The driver-side ``SplitEnumerator`` hands out, per epoch, a ``SplitRange`` for each split
(``start`` inclusive, ``end`` exclusive positions); the task side reads exactly that range.
A checkpoint records every split's position after the epoch, so a restore rewinds exactly.
A task reads a range through ``read_batches``: batches of records, each with the records'
timestamps when the source has them (Kafka's), as Flink's ``SourceReader`` emits them.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Boundedness",
    "Source",
    "SourceSplit",
    "SplitEnumerator",
    "SplitRange",
    "TimestampedBatch",
]

# Records and their timestamps (None: no record of the batch carries one).
TimestampedBatch = tuple[list[Any], list[int | None] | None]
READ_BATCH = 8192  # records per batch of the default ``read_batches``


class Boundedness:
    """Whether a source ends."""

    BOUNDED = "BOUNDED"
    CONTINUOUS_UNBOUNDED = "CONTINUOUS_UNBOUNDED"


@dataclass
class SourceSplit:
    """A split and how far it has been read. ``end`` is None for an open-ended split."""

    split_id: str
    position: Any
    end: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    finished: bool = False

    def to_json(self) -> dict[str, Any]:
        """JSON-able form, stored in checkpoint metadata."""
        return {
            "split_id": self.split_id,
            "position": self.position,
            "end": self.end,
            "info": self.info,
            "finished": self.finished,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> SourceSplit:
        """Inverse of ``to_json``."""
        return SourceSplit(
            data["split_id"],
            data["position"],
            data.get("end"),
            data.get("info", {}),
            data.get("finished", False),
        )


@dataclass(frozen=True)
class SplitRange:
    """What one task reads in one epoch: positions ``[start, end)`` of one split."""

    split_id: str
    start: Any
    end: Any
    info: dict[str, Any]
    last: bool  # the split is exhausted after this range


class Source(abc.ABC):
    """A source: configuration (picklable, shipped to tasks) plus its split logic."""

    @abc.abstractmethod
    def get_boundedness(self) -> str:
        """``Boundedness.BOUNDED`` or ``Boundedness.CONTINUOUS_UNBOUNDED``."""

    @abc.abstractmethod
    def discover_splits(self, parallelism: int, known: dict[str, SourceSplit]) -> list[SourceSplit]:
        """Splits not in ``known`` (all of them on the first call)."""

    @abc.abstractmethod
    def next_range(self, split: SourceSplit, max_records: int) -> SplitRange | None:
        """The next range of ``split`` with at most ``max_records`` records, or None when
        nothing is available now."""

    @abc.abstractmethod
    def read(self, split_range: SplitRange) -> Iterator[Any]:
        """The records of ``split_range`` (runs in a Spark task)."""

    def read_batches(self, split_range: SplitRange) -> Iterator[TimestampedBatch]:
        """The records of ``split_range`` in batches with their timestamps (runs in a Spark
        task); by default ``read()``'s records in batches of ``READ_BATCH``, without any."""
        batch: list[Any] = []
        for value in self.read(split_range):
            batch.append(value)
            if len(batch) >= READ_BATCH:
                yield batch, None
                batch = []
        if batch:
            yield batch, None

    def advance(self, split: SourceSplit, split_range: SplitRange) -> None:
        """Move ``split`` past ``split_range`` after its epoch succeeded."""
        split.position = split_range.end
        if split_range.last:
            split.finished = True


class SplitEnumerator:
    """Driver-side bookkeeping of one source's splits across epochs and restores."""

    def __init__(self, source: Source, parallelism: int) -> None:
        self.source = source
        self.parallelism = parallelism
        self.splits: dict[str, SourceSplit] = {}
        self.discover()

    def discover(self) -> None:
        """Add splits the source has not reported before (new files, say)."""
        for split in self.source.discover_splits(self.parallelism, self.splits):
            self.splits[split.split_id] = split

    def reset(self) -> None:
        """Forget all positions: read every split from its beginning."""
        self.splits = {}
        self.discover()

    def plan_epoch(self, max_records_per_split: int) -> list[SplitRange]:
        """One range per split that has data now."""
        if self.source.get_boundedness() != Boundedness.BOUNDED:
            self.discover()
        ranges = []
        for split in self.splits.values():
            if split.finished:
                continue
            r = self.source.next_range(split, max_records_per_split)
            if r is not None:
                ranges.append(r)
        return ranges

    def commit_epoch(self, ranges: list[SplitRange]) -> None:
        """The epoch that read ``ranges`` succeeded: advance the positions."""
        for r in ranges:
            self.source.advance(self.splits[r.split_id], r)

    def snapshot_state(self) -> list[dict[str, Any]]:
        """Split positions, for the checkpoint."""
        return [s.to_json() for s in self.splits.values()]

    def restore_state(self, state: list[dict[str, Any]]) -> None:
        """Reset the splits to the positions of a checkpoint."""
        self.splits = {d["split_id"]: SourceSplit.from_json(d) for d in state}
        if self.source.get_boundedness() != Boundedness.BOUNDED:
            self.discover()
