"""``NumberSequenceSource``: the numbers ``start..end`` (inclusive), split evenly."""

from __future__ import annotations

from collections.abc import Iterator

from sparkpoint.connectors.source import Boundedness, Source, SourceSplit, SplitRange

__all__ = ["NumberSequenceSource"]


class NumberSequenceSource(Source):
    """A bounded source of the integers ``start`` to ``end`` (both inclusive), like Flink's."""

    def __init__(self, start: int, end: int) -> None:
        if not isinstance(start, int) or not isinstance(end, int):
            raise ValueError("NumberSequenceSource needs integer bounds")
        if end < start:
            raise ValueError(f"end ({end}) must be >= start ({start})")
        self.start = start
        self.end = end

    def get_boundedness(self) -> str:
        return Boundedness.BOUNDED

    def discover_splits(self, parallelism: int, known: dict[str, SourceSplit]) -> list[SourceSplit]:
        if known:
            return []
        total = self.end - self.start + 1
        n = max(1, min(parallelism, total))
        splits = []
        for i in range(n):
            lo = self.start + total * i // n
            hi = self.start + total * (i + 1) // n  # exclusive
            splits.append(SourceSplit(str(i), lo, hi))
        return splits

    def next_range(self, split: SourceSplit, max_records: int) -> SplitRange | None:
        hi = min(split.position + max_records, split.end)
        return SplitRange(split.split_id, split.position, hi, {}, hi >= split.end)

    def read(self, split_range: SplitRange) -> Iterator[int]:
        return iter(range(split_range.start, split_range.end))
