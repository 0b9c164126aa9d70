"""What happens to retained checkpoints when the job ends: the retention/cleanup enums.

``ExternalizedCheckpointRetention`` is the Flink 1.20+/2.x name; ``ExternalizedCheckpointCleanup``
is the 1.x name with the same members and values. Either is accepted wherever one is.
"""

from __future__ import annotations

import enum

from sparkpoint.config import parse_enum_member

__all__ = ["ExternalizedCheckpointCleanup", "ExternalizedCheckpointRetention"]


class _RetentionBase(enum.IntEnum):
    """Shared lookup for the two spellings of the retention enum (ints, as PyFlink 1.x)."""

    @classmethod
    def of(cls, value: object) -> _RetentionBase:
        """The member of this enum named by ``value`` (either enum's member, name or int)."""
        return parse_enum_member(value, cls, cls.__name__)


class ExternalizedCheckpointRetention(_RetentionBase):
    """Cleanup behaviour for externalized checkpoints when the job ends (Flink 1.20+).

    :data:`DELETE_ON_CANCELLATION`: checkpoint state is deleted when the job is cancelled
    (and when it finishes); it is kept when the job fails.

    :data:`RETAIN_ON_CANCELLATION`: checkpoint state is kept when the job is cancelled or
    fails; you delete it by hand.

    :data:`NO_EXTERNALIZED_CHECKPOINTS`: checkpoints are not externalized: they are deleted
    whenever the job ends.
    """

    DELETE_ON_CANCELLATION = 0
    RETAIN_ON_CANCELLATION = 1
    NO_EXTERNALIZED_CHECKPOINTS = 2


class ExternalizedCheckpointCleanup(_RetentionBase):
    """The PyFlink 1.x name of :class:`ExternalizedCheckpointRetention` (same members)."""

    DELETE_ON_CANCELLATION = 0
    RETAIN_ON_CANCELLATION = 1
    NO_EXTERNALIZED_CHECKPOINTS = 2
