"""``CheckpointingMode``: the consistency guarantee of checkpoints, as PyFlink spells it."""

from __future__ import annotations

import enum

from sparkpoint.config import parse_enum_member

__all__ = ["CheckpointingMode"]


class CheckpointingMode(enum.IntEnum):
    """EXACTLY_ONCE (aligned barriers, transactional sinks) or AT_LEAST_ONCE.

    An ``IntEnum``: members equal the PyFlink 1.x int constants (``EXACTLY_ONCE == 0``).

    :data:`EXACTLY_ONCE`: on recovery every record is reflected exactly once in the state.

    :data:`AT_LEAST_ONCE`: in Flink, records may be reflected more than once after recovery.
    sparkpoint accepts it and runs it exactly like EXACTLY_ONCE (epochs are aligned by
    construction and sinks still commit on checkpoint completion), so it is never weaker.
    """

    EXACTLY_ONCE = 0
    AT_LEAST_ONCE = 1

    @staticmethod
    def of(mode: object) -> CheckpointingMode:
        """The mode named by ``mode`` (a member, its name or its int value)."""
        return parse_enum_member(mode, CheckpointingMode, "CheckpointingMode")
