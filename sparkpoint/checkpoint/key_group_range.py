"""``KeyGroupRange``: an inclusive, contiguous range of key groups, as a value."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

__all__ = ["KeyGroupRange"]


@dataclass(frozen=True, slots=True)
class KeyGroupRange:
    """Key groups ``start_key_group..end_key_group`` (both inclusive); empty when end < start."""

    start_key_group: int
    end_key_group: int

    EMPTY: ClassVar[KeyGroupRange]

    def __post_init__(self) -> None:
        if self.start_key_group < 0:
            raise ValueError(f"start_key_group must be >= 0, got {self.start_key_group}")
        if self.end_key_group < self.start_key_group - 1:
            raise ValueError(
                f"end_key_group ({self.end_key_group}) must be >= start_key_group - 1 "
                f"({self.start_key_group - 1})"
            )

    @staticmethod
    def of(start_key_group: int, end_key_group: int) -> KeyGroupRange:
        """The range ``[start, end]``, or ``EMPTY`` when it holds nothing."""
        if end_key_group < start_key_group:
            return KeyGroupRange.EMPTY
        return KeyGroupRange(start_key_group, end_key_group)

    @property
    def number_of_key_groups(self) -> int:
        """How many key groups the range holds."""
        return max(0, self.end_key_group - self.start_key_group + 1)

    def __len__(self) -> int:
        return self.number_of_key_groups

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start_key_group, self.end_key_group + 1))

    def __contains__(self, key_group: object) -> bool:
        return isinstance(key_group, int) and self.contains(key_group)

    def contains(self, key_group: int) -> bool:
        """Whether ``key_group`` lies in the range."""
        return self.start_key_group <= key_group <= self.end_key_group

    def get_intersection(self, other: KeyGroupRange) -> KeyGroupRange:
        """The key groups both ranges hold (``EMPTY`` if none)."""
        return KeyGroupRange.of(
            max(self.start_key_group, other.start_key_group),
            min(self.end_key_group, other.end_key_group),
        )

    def is_empty(self) -> bool:
        """Whether the range holds no key group."""
        return self.number_of_key_groups == 0

    def __str__(self) -> str:
        return (
            f"KeyGroupRange{{startKeyGroup={self.start_key_group}, "
            f"endKeyGroup={self.end_key_group}}}"
        )


KeyGroupRange.EMPTY = KeyGroupRange(0, -1)
