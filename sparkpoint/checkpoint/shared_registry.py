"""``SharedStateRegistry``: decides when state shared by several checkpoints may be deleted.

Semantics of Flink's ``SharedStateRegistryImpl``: each physical object (keyed by its physical
id, i.e. file path) has an entry recording the checkpoint that created it and the latest
checkpoint that used it. When checkpoints are subsumed, ``unregister_unused_state(lowest)``
discards every entry last used before the lowest retained checkpoint, except state that came
from a restored snapshot that the job did not claim (NO_CLAIM / LEGACY restore).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from sparkpoint.checkpoint.handles import (
    PlaceholderStreamStateHandle,
    StreamStateHandle,
    discard_quietly,
)

if TYPE_CHECKING:
    from sparkpoint.checkpoint.metadata import OperatorState

__all__ = ["RecoveryClaimMode", "SharedStateEntry", "SharedStateRegistry"]

_LOG = logging.getLogger(__name__)


class RecoveryClaimMode:
    """How a job restored from a snapshot treats that snapshot's files (Flink's names)."""

    CLAIM = "CLAIM"
    NO_CLAIM = "NO_CLAIM"
    LEGACY = "LEGACY"
    DEFAULT = NO_CLAIM

    @staticmethod
    def of(mode: object) -> str:
        """The mode named by ``mode`` (a string or an enum member with a ``name``)."""
        name = str(getattr(mode, "name", mode)).upper()
        if name not in ("CLAIM", "NO_CLAIM", "LEGACY"):
            raise ValueError(f"Unknown claim mode {mode!r}; expected CLAIM, NO_CLAIM or LEGACY")
        return name


@dataclass(slots=True)
class SharedStateEntry:
    """The registered handle of one physical object and the checkpoints that use it."""

    handle: StreamStateHandle
    created_by_checkpoint_id: int
    last_used_checkpoint_id: int


class _RestoredCheckpoint(Protocol):
    @property
    def checkpoint_id(self) -> int: ...

    @property
    def operator_states(self) -> tuple[OperatorState, ...]: ...


class SharedStateRegistry:
    """Tracks shared state handles and discards them when no retained checkpoint uses them.

    ``discard_executor`` runs the discards (default: in the calling thread); Flink deletes
    asynchronously, and a cleaner's thread pool can be passed here. Thread-safe.
    """

    def __init__(
        self, discard_executor: Callable[[Callable[[], None]], object] | None = None
    ) -> None:
        self._entries: dict[str, SharedStateEntry] = {}
        self._lock = threading.Lock()
        self._highest_not_claimed_checkpoint_id = -1
        self._discard_executor = discard_executor
        self._open = True

    def register_reference(
        self, handle: StreamStateHandle, checkpoint_id: int
    ) -> StreamStateHandle:
        """Register that checkpoint ``checkpoint_id`` uses ``handle``; returns the registered
        handle (a placeholder is swapped for the handle registered under its key)."""
        key = handle.physical_id
        with self._lock:
            if not self._open:
                raise ValueError("The shared state registry is closed")
            entry = self._entries.get(key)
            if entry is None:
                if isinstance(handle, PlaceholderStreamStateHandle):
                    raise ValueError(
                        f"Attempt to reference unknown shared state {key!r} from checkpoint "
                        f"{checkpoint_id}: a placeholder can only stand for state already "
                        "registered by a confirmed checkpoint"
                    )
                self._entries[key] = SharedStateEntry(handle, checkpoint_id, checkpoint_id)
                return handle
            if entry.handle is handle or isinstance(handle, PlaceholderStreamStateHandle):
                pass
            elif entry.handle == handle and type(entry.handle) is type(handle):
                _LOG.info("Duplicated registration under key %s with an equal object", key)
            else:
                raise ValueError(
                    f"Unexpected registration under key {key!r} by checkpoint {checkpoint_id}: "
                    f"registered {entry.handle!r}, new {handle!r}. Shared state may only be "
                    "registered again as the same object, an equal object or a placeholder"
                )
            entry.last_used_checkpoint_id = max(entry.last_used_checkpoint_id, checkpoint_id)
            return entry.handle

    def register_all(
        self, operator_states: Iterable[OperatorState], checkpoint_id: int
    ) -> tuple[OperatorState, ...]:
        """Register the shared state of every operator; returns the resolved states."""
        return tuple(op.register_shared_states(self, checkpoint_id) for op in operator_states)

    def register_all_after_restore(
        self, checkpoint: _RestoredCheckpoint, claim_mode: object = RecoveryClaimMode.NO_CLAIM
    ) -> tuple[OperatorState, ...]:
        """Register a restored checkpoint; unless CLAIM, its files are never deleted by us."""
        resolved = self.register_all(checkpoint.operator_states, checkpoint.checkpoint_id)
        if RecoveryClaimMode.of(claim_mode) != RecoveryClaimMode.CLAIM:
            with self._lock:
                self._highest_not_claimed_checkpoint_id = max(
                    self._highest_not_claimed_checkpoint_id, checkpoint.checkpoint_id
                )
        return resolved

    def unregister_unused_state(
        self, lowest_retained_checkpoint_id: int
    ) -> list[StreamStateHandle]:
        """Drop entries last used before ``lowest_retained_checkpoint_id`` and discard them
        (except unclaimed restored state); returns the handles scheduled for discarding."""
        to_discard: list[StreamStateHandle] = []
        with self._lock:
            for key in list(self._entries):
                entry = self._entries[key]
                if entry.last_used_checkpoint_id < lowest_retained_checkpoint_id:
                    del self._entries[key]
                    if entry.created_by_checkpoint_id > self._highest_not_claimed_checkpoint_id:
                        to_discard.append(entry.handle)
        if to_discard:
            self._schedule_discard(to_discard)
        return to_discard

    def _schedule_discard(self, handles: list[StreamStateHandle]) -> None:
        if self._discard_executor is None:
            discard_quietly(handles)
        else:
            self._discard_executor(lambda: discard_quietly(handles))

    def check_in_use(self, handle: StreamStateHandle) -> bool:
        """Whether ``handle``'s physical object is registered (used by a retained checkpoint)."""
        with self._lock:
            return handle.physical_id in self._entries

    def get_entry(self, key: str) -> SharedStateEntry | None:
        """A copy of the entry registered under ``key`` (``None`` if none)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            return SharedStateEntry(
                entry.handle, entry.created_by_checkpoint_id, entry.last_used_checkpoint_id
            )

    @property
    def highest_not_claimed_checkpoint_id(self) -> int:
        """The highest restored checkpoint whose files the job must never delete (-1: none)."""
        return self._highest_not_claimed_checkpoint_id

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def keys(self) -> list[str]:
        """The physical ids of all registered objects."""
        with self._lock:
            return list(self._entries)

    def close(self) -> None:
        """Refuse further registrations (entries stay; nothing is discarded)."""
        with self._lock:
            self._open = False

    def __repr__(self) -> str:
        return f"SharedStateRegistry({len(self)} entries)"
