"""``JobID``, ``CompletableFuture`` and ``InputDependencyConstraint`` as ``pyflink.common``
spells them."""

from __future__ import annotations

import enum
from concurrent.futures import Future

__all__ = ["CompletableFuture", "InputDependencyConstraint", "JobID"]

# The futures JobClient returns: Python's Future has PyFlink's CompletableFuture methods
# (cancel, cancelled, done, result, exception).
CompletableFuture = Future


class JobID:
    """A job's id: 32 hex digits (``JobClient.get_job_id()`` returns its text)."""

    def __init__(self, hex_string: str) -> None:
        text = str(hex_string)
        try:
            int(text, 16)
        except ValueError as exc:
            raise ValueError(f"A JobID is 32 hexadecimal digits, got {hex_string!r}") from exc
        if len(text) != 32:
            raise ValueError(f"A JobID is 32 hexadecimal digits, got {hex_string!r}")
        self._hex = text.lower()

    def to_hex_string(self) -> str:
        """The 32 hex digits."""
        return self._hex

    def __str__(self) -> str:
        return self._hex

    def __repr__(self) -> str:
        return f"JobID({self._hex})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JobID) and self._hex == other._hex

    def __hash__(self) -> int:
        return hash(self._hex)


class InputDependencyConstraint(enum.Enum):
    """Deprecated in Flink (batch scheduling of an operator's inputs); accepted, no effect."""

    ANY = 0
    ALL = 1
