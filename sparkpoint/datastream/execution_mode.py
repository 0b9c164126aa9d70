"""``RuntimeExecutionMode`` as ``pyflink.datastream.execution_mode`` spells it."""

from __future__ import annotations

import enum

from sparkpoint.config import parse_enum_member

__all__ = ["RuntimeExecutionMode"]


class RuntimeExecutionMode(enum.IntEnum):
    """STREAMING emits every update; BATCH emits final results of keyed aggregations.

    AUTOMATIC is accepted and runs as STREAMING.
    """

    STREAMING = 0
    BATCH = 1
    AUTOMATIC = 2

    @staticmethod
    def of(mode: object) -> RuntimeExecutionMode:
        """The mode named by ``mode`` (a member, its name or its int value)."""
        return parse_enum_member(mode, RuntimeExecutionMode, "RuntimeExecutionMode")
