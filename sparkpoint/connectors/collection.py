"""The source behind ``from_collection``: a list, split into contiguous slices."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sparkpoint.connectors.source import Boundedness, Source, SourceSplit, SplitRange

__all__ = ["CollectionSource"]


class CollectionSource(Source):
    """A bounded source over an in-memory collection (shipped to the tasks with the plan).

    Like Flink's ``fromCollection`` it is not parallel: one split, so records keep their order.
    """

    def __init__(self, collection: Sequence[Any]) -> None:
        self.collection = list(collection)

    def get_boundedness(self) -> str:
        return Boundedness.BOUNDED

    def discover_splits(self, parallelism: int, known: dict[str, SourceSplit]) -> list[SourceSplit]:
        if known:
            return []
        return [SourceSplit("0", 0, len(self.collection))]

    def next_range(self, split: SourceSplit, max_records: int) -> SplitRange | None:
        hi = min(split.position + max_records, split.end)
        return SplitRange(split.split_id, split.position, hi, {}, hi >= split.end)

    def read(self, split_range: SplitRange) -> Iterator[Any]:
        return iter(self.collection[split_range.start : split_range.end])
