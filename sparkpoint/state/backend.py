"""The keyed and operator state backend contracts that the runtime programs against.

A ``StateBackendFactory`` is configuration only (picklable, shipped to executors); the API's
``sparkpoint.datastream.StateBackend`` classes implement it. It creates, per keyed subtask, a
``KeyedStateBackend`` that holds the working state of that subtask's key groups in a local
directory, commits it locally once per epoch, snapshots it through a
``CheckpointStreamFactory`` and restores it from any set of keyed handles (rescaling).
Implementations: ``state.heap`` and ``state.rocksdb``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkpoint.checkpoint.handles import KeyedStateHandle, OperatorStateHandle
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.streams import CheckpointStreamFactory
from sparkpoint.clock import SYSTEM_CLOCK, Clock
from sparkpoint.state.key_groups import UNTYPED_KEYS, KeyGroupAssigner

if TYPE_CHECKING:
    from sparkpoint.state.descriptors import StateDescriptor
    from sparkpoint.state.serializers import TypeSerializer

__all__ = [
    "KeyedStateBackend",
    "KeyedStateBackendParameters",
    "OperatorStateBackend",
    "SnapshotType",
    "StateBackendFactory",
]


class SnapshotType:
    """What a snapshot is for: a checkpoint (may be incremental), a full checkpoint (shares
    no file with earlier snapshots: the first one after a restore) or a canonical savepoint."""

    CHECKPOINT = "checkpoint"
    FULL_CHECKPOINT = "full-checkpoint"
    SAVEPOINT = "savepoint"


@dataclass(frozen=True)
class KeyedStateBackendParameters:
    """Everything a keyed backend needs to be created for one subtask."""

    job_id: str
    operator_id: str
    subtask_index: int
    parallelism: int
    max_parallelism: int
    key_group_range: KeyGroupRange
    local_dir: str
    # Processing time for TTL (``now_ms``). The runtime passes the epoch's clock; tests a
    # ``sparkpoint.testing.ManualClock``.
    clock: Clock = SYSTEM_CLOCK
    # How keys become bytes in snapshots and savepoints; ``None`` = pickle (untyped keys).
    # Set it from the key type of ``key_by(..., key_type=...)`` for compact, typed keys.
    key_serializer: TypeSerializer | None = None
    # MAP states that hold timers (user keys ``(domain, timestamp)``, values ``True``): a
    # backend may store them in time order, as Flink's timer services do. The runtime names
    # its timers state here.
    timer_states: frozenset[str] = frozenset()
    # How keys map to key groups: by the declared key type of ``key_by(..., key_type=...)``
    # as PyFlink hashes it, or by the value (untyped keys).
    key_group_assigner: KeyGroupAssigner = UNTYPED_KEYS


class KeyedStateBackend(abc.ABC):
    """Working keyed state of one subtask (a key-group range).

    Usage per epoch, inside one Spark task::

        backend = state_backend.create_keyed_state_backend(params)   # opens local state
        backend.restore(handles)            # only when (re)starting from a checkpoint
        backend.set_current_key(k); backend.get_partitioned_state(desc).update(v) ...
        backend.commit_local(epoch)         # atomic: all changes of the epoch + marker
        async_part = backend.snapshot(checkpoint_id, factory)   # when a checkpoint is due
        backend.close()
        handle = async_part()               # upload (may run in another thread)

    Local commits make a task retried by Spark safe: ``local_epoch()`` tells which epoch the
    local state reflects, and ``revert_to(epoch - 1)`` undoes the last commit once.
    """

    @property
    @abc.abstractmethod
    def key_group_range(self) -> KeyGroupRange:
        """The key groups this backend owns."""

    @abc.abstractmethod
    def set_current_key(self, key: Any) -> None:
        """Select the key that state objects read and write (computes its key group)."""

    @abc.abstractmethod
    def get_current_key(self) -> Any:
        """The key last set."""

    @abc.abstractmethod
    def get_partitioned_state(self, descriptor: StateDescriptor) -> Any:
        """The state object (ValueState, ListState, ...) for ``descriptor``, bound to the
        current key. Registers the state on first use; the same object is returned later."""

    @abc.abstractmethod
    def get_keys(self, state_name: str) -> Iterable[Any]:
        """All keys that have a value in the named state (for timers, debugging, dumps)."""

    @abc.abstractmethod
    def local_epoch(self) -> int | None:
        """The epoch the local state was last committed at; ``None`` if there is none."""

    @abc.abstractmethod
    def commit_local(self, epoch: int, extra: bytes = b"") -> None:
        """Atomically persist every change since the previous commit with the marker
        ``epoch`` (and opaque ``extra`` bytes, e.g. timers/watermark of the runtime)."""

    @abc.abstractmethod
    def local_extra(self) -> bytes:
        """The ``extra`` bytes stored by the last ``commit_local`` (b"" if none)."""

    @abc.abstractmethod
    def revert_to(self, epoch: int) -> bool:
        """Undo the last local commit if that brings the state back to ``epoch``; returns
        whether the state is now at ``epoch``. Only one step back is ever possible."""

    @abc.abstractmethod
    def snapshot(
        self,
        checkpoint_id: int,
        stream_factory: CheckpointStreamFactory,
        snapshot_type: str = SnapshotType.CHECKPOINT,
    ) -> Callable[[], KeyedStateHandle | None]:
        """Take a consistent local copy now (synchronous part) and return the upload step.

        The returned callable writes through ``stream_factory`` and returns the handle, or
        ``None`` when there is no state. Updates may continue while it runs.
        """

    @abc.abstractmethod
    def restore(self, handles: Sequence[KeyedStateHandle]) -> None:
        """Replace the local state by the key groups of ``handles`` within our range.

        Handles may come from any old parallelism; only intersecting key groups are read.
        Raises ``RestoreError`` on max-parallelism mismatch or missing files.
        """

    # Whether ``prefetch`` reads anything (callers compute key groups up front only then).
    batched_reads = False

    def prefetch(self, keys: list[Any], key_groups: list[int]) -> None:  # noqa: B027
        """A hint: the next records set these keys (with these key groups) as current key;
        a backend whose reads are expensive may read their state in one batch now."""

    def track_changes(self) -> bool:
        """From now on, record what each ``commit_local`` changes, for a durable changelog
        (``state.changelog``); returns False if this backend cannot."""
        return False

    def take_changes(self) -> bytes | None:
        """The changelog entry of the last ``commit_local`` since ``track_changes`` (None:
        nothing changed or nothing recorded); taking it forgets it."""
        return None

    def apply_changes(self, entries: Sequence[bytes]) -> None:
        """Apply changelog entries (oldest first) over freshly restored state, as part of
        the state the next ``commit_local`` commits."""
        raise NotImplementedError(f"{type(self).__name__} cannot apply changelog entries")

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:  # noqa: B027
        """A checkpoint this backend took part in completed (incremental bookkeeping)."""

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:  # noqa: B027
        """A checkpoint this backend took part in was aborted."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release resources (closes RocksDB); local state stays on disk."""

    def dispose(self) -> None:
        """Close and delete the local state directory."""
        self.close()


class OperatorStateBackend(abc.ABC):
    """Operator (non-keyed) state of one subtask: the broadcast states of a broadcast
    operator (Flink's list and union state have no PyFlink user and are not kept)."""

    @abc.abstractmethod
    def get_broadcast_state(self, descriptor: Any) -> Any:
        """The broadcast map state of a ``MapStateDescriptor`` (identical on every
        subtask)."""

    @abc.abstractmethod
    def snapshot(self, stream_factory: CheckpointStreamFactory) -> OperatorStateHandle | None:
        """Write every named state; ``None`` if all are empty."""


class StateBackendFactory(abc.ABC):
    """Configuration of how working state is held; creates per-subtask backends."""

    @abc.abstractmethod
    def create_keyed_state_backend(self, params: KeyedStateBackendParameters) -> KeyedStateBackend:
        """Open (or create) the local state of one keyed subtask."""

    @abc.abstractmethod
    def create_operator_state_backend(
        self, restore_from: Sequence[OperatorStateHandle] = ()
    ) -> OperatorStateBackend:
        """An operator-state backend, restored from ``restore_from`` when given."""

    def supports_incremental_checkpoints(self) -> bool:
        """Whether snapshots may reference earlier checkpoints' shared files."""
        return False

    def keyed_backend_name(self) -> str:
        """The ``backend_name`` of the keyed backends it creates ("": unknown); changelog
        checkpoints record it to rebuild state from their entries."""
        return ""

    def asynchronous_snapshots(self) -> bool:
        """Whether checkpoint uploads run in the background after the synchronous part
        (Flink's backends always do; the legacy ones let the user turn it off)."""
        return True
