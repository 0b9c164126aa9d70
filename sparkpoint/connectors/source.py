"""Replayable sources: splits with positions, read one bounded range per epoch.

The driver-side ``SplitEnumerator`` hands out, per epoch, a ``SplitRange`` for each split
(``start`` inclusive, ``end`` exclusive positions); the task side reads exactly that range.
A checkpoint records every split's position after the epoch, so a restore rewinds exactly.
A task reads a range through ``read_batches``: batches of records, each with the records'
timestamps when the source has them (Kafka's), as Flink's ``SourceReader`` emits them.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.errors import UnsafeStatePathError

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
    # How many records the range holds at most (None: the source does not count them);
    # the driver starts an epoch at once when a range is full (epoch pacing).
    records: int | None = None


class Source(abc.ABC):
    """A source: configuration (picklable, shipped to tasks) plus its split logic."""

    #: Whether ``read_batches`` may run for several ranges at once in one process (threads):
    #: a task running several ranges then reads the later ones while the first is processed.
    concurrent_reads: bool = False
    #: Whether the source runs Spark jobs of its own in the application (a streaming query):
    #: they need task slots, so the ``auto`` epoch mode leaves the slots to Spark jobs.
    runs_spark_jobs: bool = False

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

    def prepare_ranges(self, splits: Sequence[SourceSplit]) -> None:
        """Called on the driver before ``next_range`` of each of ``splits`` in one planning,
        so that a source can look them all up at once (Kafka: one ``ListOffsets`` per
        leader instead of two round trips per partition); by default nothing."""
        return None

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

    def finishes_when_splits_end(self) -> bool:
        """Whether the source ends once every split has ended: a bounded one does, and so
        does an unbounded one given stopping positions (Kafka's ``set_unbounded``)."""
        return self.get_boundedness() == Boundedness.BOUNDED

    def split_lag(self, split: SourceSplit) -> int | None:
        """Records of ``split`` that are available and not yet read, as last seen by
        ``next_range`` on the driver (Kafka's consumer lag); None: the source cannot tell."""
        return None

    def split_skipped(self, split: SourceSplit) -> int | None:
        """Records of ``split`` skipped unread because its input no longer held them (Kafka
        with ``sparkpoint.skip-deleted-records``), in the epochs accepted so far; None: the
        source never skips."""
        return None

    def check_restored_splits(self, splits: Any, where: str, field: str) -> None:
        """Refuse restored splits (``splits``: a checkpoint's enumerator snapshot, the
        ``field`` of the ``_metadata`` at ``where``) that this source would not have made,
        before anything reads them; the error names ``where``, the field and the value.
        By default a source accepts what it is given."""
        return None

    def notify_checkpoint_complete(self, checkpoint_id: int, splits: list[dict[str, Any]]) -> None:
        """Checkpoint ``checkpoint_id`` completed with the split positions ``splits`` (runs
        on the driver, as Flink's ``notifyCheckpointComplete``); by default nothing."""
        return None

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
        splits = [split for split in self.splits.values() if not split.finished]
        self.source.prepare_ranges(splits)
        for split in splits:
            r = self.source.next_range(split, max_records_per_split)
            if r is not None:
                ranges.append(r)
        return ranges

    def commit_epoch(self, ranges: list[SplitRange]) -> None:
        """The epoch that read ``ranges`` succeeded: advance the positions."""
        for r in ranges:
            self.source.advance(self.splits[r.split_id], r)

    def lag(self) -> dict[str, int]:
        """Split id -> records available and not yet read, for the splits whose source
        can tell (none for most sources; every unfinished partition for Kafka)."""
        out: dict[str, int] = {}
        for split_id, split in self.splits.items():
            if split.finished:
                continue
            lag = self.source.split_lag(split)
            if lag is not None:
                out[split_id] = lag
        return out

    def skipped(self) -> dict[str, int]:
        """Split id -> records skipped unread (sources that can skip: Kafka, opted in)."""
        out: dict[str, int] = {}
        for split_id, split in self.splits.items():
            skipped = self.source.split_skipped(split)
            if skipped is not None:
                out[split_id] = skipped
        return out

    def snapshot_state(self) -> list[dict[str, Any]]:
        """Split positions, for the checkpoint."""
        return [s.to_json() for s in self.splits.values()]

    def check_restored(
        self, state: Any, where: str, field: str = "the source's splits"
    ) -> list[SourceSplit]:
        """The splits of a checkpoint's ``state`` (its ``field`` in ``where``), checked by the
        source before any is used: a snapshot's splits are input from outside."""
        if not isinstance(state, list) or not all(
            isinstance(d, dict) and isinstance(d.get("split_id"), str) and "position" in d
            for d in state
        ):
            raise UnsafeStatePathError(
                f"Refusing {field} in {where}: they are not a list of splits with string "
                "split ids and positions."
            )
        self.source.check_restored_splits(state, where, field)
        return [SourceSplit.from_json(d) for d in state]

    def restore_state(
        self, state: list[dict[str, Any]], where: str = "the master state", field: str = "splits"
    ) -> None:
        """Reset the splits to the positions of a checkpoint (each split checked first)."""
        self.splits = {s.split_id: s for s in self.check_restored(state, where, field)}
        if self.source.get_boundedness() != Boundedness.BOUNDED:
            self.discover()
