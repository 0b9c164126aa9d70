"""State handles: immutable values that point at checkpointed bytes and know how to discard them.

Sizes are known without I/O. ``discard()`` deletes what the handle owns; handles to shared
state are discarded only by the shared-state registry.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO

from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.state_digest import (
    copy_verified,
    open_state_file,
    open_verified,
    read_state_file,
    verify_bytes,
)

if TYPE_CHECKING:
    from sparkpoint.checkpoint.shared_registry import SharedStateRegistry

__all__ = [
    "ByteStreamStateHandle",
    "ChangelogStateBackendHandle",
    "FileStateHandle",
    "HandleAndLocalPath",
    "IncrementalRemoteKeyedStateHandle",
    "KeyGroupRangeOffsets",
    "KeyGroupsSavepointStateHandle",
    "KeyGroupsStateHandle",
    "KeyedStateHandle",
    "OperatorStateHandle",
    "PlaceholderStreamStateHandle",
    "RelativeFileStateHandle",
    "StateObject",
    "StreamStateHandle",
    "describe_stream",
    "discard_quietly",
    "stream_handles",
]


class StateObject(abc.ABC):
    """Anything a checkpoint holds: it knows its size and how to delete what it owns."""

    @property
    @abc.abstractmethod
    def state_size(self) -> int:
        """Size of the state in bytes, known without I/O (best effort for files)."""

    @abc.abstractmethod
    def discard(self) -> None:
        """Delete the underlying storage this object exclusively owns."""


class StreamStateHandle(StateObject):
    """A handle to a stream of bytes: inline, in a file, or a placeholder for shared state."""

    @abc.abstractmethod
    def open_input_stream(self) -> BinaryIO:
        """A seekable stream over the bytes."""

    def read_all(self) -> bytes:
        """All bytes of the stream."""
        with self.open_input_stream() as stream:
            return stream.read()

    def as_bytes_if_in_memory(self) -> bytes | None:
        """The bytes, when held inline; ``None`` for handles that need I/O."""
        return None

    @property
    def physical_id(self) -> str:
        """Identifies the physical object (file path or inline name) for sharing and dedupe."""
        raise TypeError(f"{type(self).__name__} has no physical id")


@dataclass(frozen=True, slots=True)
class ByteStreamStateHandle(StreamStateHandle):
    """State held inline (it ends up inside ``_metadata``). Equality is by name."""

    handle_name: str
    data: bytes = field(compare=False, repr=False)

    @property
    def state_size(self) -> int:
        return len(self.data)

    def discard(self) -> None:
        """Nothing to delete: the bytes live in the metadata."""

    def open_input_stream(self) -> BinaryIO:
        return io.BytesIO(self.data)

    def read_all(self) -> bytes:
        return self.data

    def as_bytes_if_in_memory(self) -> bytes | None:
        return self.data

    @property
    def physical_id(self) -> str:
        return self.handle_name


@dataclass(frozen=True, slots=True)
class FileStateHandle(StreamStateHandle):
    """State in one file at an absolute path/URI. Equality is by path.

    ``digest`` (SHA-256 of the file's bytes, ``state_digest``) is recorded by every stream
    written since digests exist; with it every read verifies the whole file first and raises
    ``CorruptStateError`` naming it on a mismatch. ``None``: an older snapshot, read as is.
    """

    path: str
    size: int = field(compare=False)
    digest: bytes | None = field(default=None, compare=False, repr=False, kw_only=True)

    @property
    def state_size(self) -> int:
        return self.size

    def discard(self) -> None:
        from sparkpoint.fs import get_filesystem

        get_filesystem(self.path).delete(self.path)

    def open_input_stream(self) -> BinaryIO:
        from sparkpoint.fs import get_filesystem

        fs = get_filesystem(self.path)
        if self.digest is None:
            return open_state_file(fs, self.path, self.size)
        return open_verified(fs, self.path, self.size, self.digest)

    def read_all(self) -> bytes:
        from sparkpoint.fs import get_filesystem

        data = read_state_file(get_filesystem(self.path), self.path, self.size)
        if self.digest is not None:
            verify_bytes(self.path, self.size, self.digest, data)
        return data

    def copy_to_local(self, target: str) -> None:
        """Copy the file to the local path ``target`` (verified against ``digest`` when
        recorded; a mismatch deletes the copy)."""
        from sparkpoint.fs import get_filesystem

        fs = get_filesystem(self.path)
        if self.digest is not None:
            copy_verified(fs, self.path, self.size, self.digest, target)
            return
        left = self.size  # never past the recorded size
        with fs.open_input(self.path) as src, open(target, "wb") as out:
            while left > 0 and (chunk := src.read(min(left, 1 << 20))):
                out.write(chunk)
                left -= len(chunk)

    @property
    def physical_id(self) -> str:
        return self.path


@dataclass(frozen=True, slots=True)
class RelativeFileStateHandle(FileStateHandle):
    """A file in the exclusive directory, recorded by name relative to it (relocatable).

    ``path`` is the absolute location resolved against the directory the metadata was loaded
    from; only ``relative_path`` is written to ``_metadata``.
    """

    relative_path: str = ""


@dataclass(frozen=True, slots=True)
class PlaceholderStreamStateHandle(StreamStateHandle):
    """Stands for shared state already uploaded by a confirmed checkpoint.

    The registry swaps it for the registered handle; it cannot be read itself.
    """

    shared_key: str
    size: int = field(compare=False)

    @property
    def state_size(self) -> int:
        return self.size

    def discard(self) -> None:
        """Placeholders own nothing."""

    def open_input_stream(self) -> BinaryIO:
        raise TypeError(
            f"Placeholder for shared state {self.shared_key!r} must be replaced by the "
            "registered handle before it can be read"
        )

    @property
    def physical_id(self) -> str:
        return self.shared_key


@dataclass(frozen=True, slots=True)
class KeyGroupRangeOffsets:
    """Per key group, the byte offset where its data starts in the delegate stream."""

    key_group_range: KeyGroupRange
    offsets: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.offsets) != self.key_group_range.number_of_key_groups:
            raise ValueError(
                f"{len(self.offsets)} offsets given for "
                f"{self.key_group_range.number_of_key_groups} key groups"
            )

    def get_key_group_offset(self, key_group: int) -> int:
        """The offset of ``key_group`` (which must lie in the range)."""
        if not self.key_group_range.contains(key_group):
            raise IndexError(f"Key group {key_group} is not in {self.key_group_range}")
        return self.offsets[key_group - self.key_group_range.start_key_group]

    def get_intersection(self, key_group_range: KeyGroupRange) -> KeyGroupRangeOffsets:
        """The offsets of the key groups also in ``key_group_range``."""
        inter = self.key_group_range.get_intersection(key_group_range)
        start = inter.start_key_group - self.key_group_range.start_key_group
        return KeyGroupRangeOffsets(inter, self.offsets[start : start + len(inter)])

    def items(self) -> list[tuple[int, int]]:
        """``(key_group, offset)`` pairs in key-group order."""
        return list(zip(self.key_group_range, self.offsets))


class KeyedStateHandle(StateObject):
    """State for a range of key groups."""

    @property
    @abc.abstractmethod
    def key_group_range(self) -> KeyGroupRange:
        """The key groups this handle holds state for."""

    @abc.abstractmethod
    def get_intersection(self, key_group_range: KeyGroupRange) -> KeyedStateHandle | None:
        """This handle cut to ``key_group_range``, or ``None`` if they share no key group."""

    def register_shared_states(
        self, registry: SharedStateRegistry, checkpoint_id: int
    ) -> KeyedStateHandle:
        """Register shared parts with the registry; returns the handle with placeholders
        replaced by the registered handles (itself when it has no shared parts)."""
        return self


@dataclass(frozen=True, slots=True)
class KeyGroupsStateHandle(KeyedStateHandle):
    """A full snapshot: one stream with the state of each key group at a known offset."""

    group_range_offsets: KeyGroupRangeOffsets
    delegate: StreamStateHandle
    state_handle_id: str = ""

    @property
    def key_group_range(self) -> KeyGroupRange:
        return self.group_range_offsets.key_group_range

    @property
    def state_size(self) -> int:
        return self.delegate.state_size

    def discard(self) -> None:
        self.delegate.discard()

    def get_intersection(self, key_group_range: KeyGroupRange) -> KeyGroupsStateHandle | None:
        offsets = self.group_range_offsets.get_intersection(key_group_range)
        if offsets.key_group_range.is_empty():
            return None
        return dataclasses.replace(self, group_range_offsets=offsets)  # a savepoint's stays one


@dataclass(frozen=True, slots=True)
class KeyGroupsSavepointStateHandle(KeyGroupsStateHandle):
    """A key-groups handle written for a savepoint (canonical format, no handle id)."""


@dataclass(frozen=True, slots=True)
class HandleAndLocalPath:
    """A remote handle and the file name it has in the local (RocksDB) directory."""

    handle: StreamStateHandle
    local_path: str

    @property
    def state_size(self) -> int:
        return self.handle.state_size


@dataclass(frozen=True, slots=True)
class IncrementalRemoteKeyedStateHandle(KeyedStateHandle):
    """An incremental RocksDB snapshot: shared SST files plus private files and a meta stream.

    Shared files may be referenced by later checkpoints; the registry owns their lifetime.
    """

    backend_identifier: str
    range: KeyGroupRange
    checkpoint_id: int
    shared_state: tuple[HandleAndLocalPath, ...]
    private_state: tuple[HandleAndLocalPath, ...]
    meta_state_handle: StreamStateHandle
    checkpointed_size: int = -1
    state_handle_id: str = ""

    @property
    def key_group_range(self) -> KeyGroupRange:
        return self.range

    @property
    def state_size(self) -> int:
        return (
            self.meta_state_handle.state_size
            + sum(h.state_size for h in self.shared_state)
            + sum(h.state_size for h in self.private_state)
        )

    @property
    def incremental_size(self) -> int:
        """Bytes this checkpoint uploaded (placeholders for reused files count zero)."""
        if self.checkpointed_size >= 0:
            return self.checkpointed_size
        return self.state_size

    def discard(self) -> None:
        """Discard private state and the meta stream; shared files belong to the registry."""
        discard_quietly([self.meta_state_handle, *(h.handle for h in self.private_state)])

    def get_intersection(
        self, key_group_range: KeyGroupRange
    ) -> IncrementalRemoteKeyedStateHandle | None:
        # A RocksDB instance cannot be cut by key group: the restoring side opens it and
        # drops the key groups outside its range (Flink does the same, with deleteRange).
        if self.range.get_intersection(key_group_range).is_empty():
            return None
        return self

    def register_shared_states(
        self, registry: SharedStateRegistry, checkpoint_id: int
    ) -> IncrementalRemoteKeyedStateHandle:
        """Register every shared file; placeholders are swapped for the registered handles."""
        resolved = tuple(
            HandleAndLocalPath(registry.register_reference(h.handle, checkpoint_id), h.local_path)
            for h in self.shared_state
        )
        return dataclasses.replace(self, shared_state=resolved)


@dataclass(frozen=True, slots=True)
class ChangelogStateBackendHandle(KeyedStateHandle):
    """A changelog checkpoint of one subtask (Flink's ``ChangelogStateBackendHandle``,
    FLIP-158): its state as of the latest materialization plus the changelog entries of
    every epoch since, oldest first.

    Every part is shared: later checkpoints reference the same materialization and entries,
    so the shared-state registry alone deletes them. ``changelog`` entries hold the change
    format of the backend named by ``backend_identifier``; ``new_entries`` trailing entries
    (and the materialization, when ``materialization_id == checkpoint_id``) were written for
    this checkpoint, the rest were referenced by an earlier one.
    """

    backend_identifier: str
    range: KeyGroupRange
    checkpoint_id: int
    materialization_id: int
    materialized: tuple[KeyedStateHandle, ...]
    changelog: tuple[StreamStateHandle, ...]
    new_entries: int = 0

    @property
    def key_group_range(self) -> KeyGroupRange:
        return self.range

    @property
    def state_size(self) -> int:
        return sum(h.state_size for h in self.materialized) + sum(
            h.state_size for h in self.changelog
        )

    @property
    def materialized_here(self) -> bool:
        """Whether this checkpoint wrote its materialization."""
        return self.materialization_id == self.checkpoint_id

    @property
    def new_changelog(self) -> tuple[StreamStateHandle, ...]:
        """The entries written since the previous checkpoint."""
        return self.changelog[len(self.changelog) - self.new_entries :]

    def discard(self) -> None:
        """Nothing: every part is shared, the registry deletes it once unused."""

    def get_intersection(
        self, key_group_range: KeyGroupRange
    ) -> ChangelogStateBackendHandle | None:
        # Entries span the whole range: the restoring side rebuilds this subtask's state and
        # keeps the key groups it owns (state/changelog_restore.py).
        if self.range.get_intersection(key_group_range).is_empty():
            return None
        return self

    def register_shared_states(
        self, registry: SharedStateRegistry, checkpoint_id: int
    ) -> ChangelogStateBackendHandle:
        """Register every file of the materialization and every entry; placeholders in the
        materialization are swapped for the registered handles."""
        materialized = []
        for handle in self.materialized:
            resolved = handle.register_shared_states(registry, checkpoint_id)
            for part in stream_handles(resolved):
                registry.register_reference(part, checkpoint_id)
            materialized.append(resolved)
        changelog = tuple(registry.register_reference(h, checkpoint_id) for h in self.changelog)
        return dataclasses.replace(self, materialized=tuple(materialized), changelog=changelog)


def describe_stream(handle: StreamStateHandle) -> str:
    """How errors name a stream: ``file <path>`` or ``inline stream <name>``."""
    if isinstance(handle, FileStateHandle):
        return f"file {handle.path}"
    if isinstance(handle, ByteStreamStateHandle):
        return f"inline stream {handle.handle_name} (inside _metadata)"
    return repr(handle)


def stream_handles(state: StateObject) -> list[StreamStateHandle]:
    """Every stream handle inside ``state`` (itself, for a stream handle)."""
    if isinstance(state, StreamStateHandle):
        return [state]
    if isinstance(state, KeyGroupsStateHandle | OperatorStateHandle):
        return [state.delegate]
    if isinstance(state, IncrementalRemoteKeyedStateHandle):
        return [
            state.meta_state_handle,
            *(item.handle for item in (*state.shared_state, *state.private_state)),
        ]
    if isinstance(state, ChangelogStateBackendHandle):
        out: list[StreamStateHandle] = []
        for handle in state.materialized:
            out.extend(stream_handles(handle))
        return [*out, *state.changelog]
    raise TypeError(f"Unknown state object {type(state).__name__}")


class OperatorStateDistributionMode(enum.IntEnum):
    """How operator (non-keyed) list state is redistributed on restore."""

    SPLIT_DISTRIBUTE = 0
    UNION = 1
    BROADCAST = 2


@dataclass(frozen=True, slots=True)
class StateMetaInfo:
    """Where the entries of one named operator state lie in the stream, and how to distribute."""

    offsets: tuple[int, ...]
    distribution_mode: OperatorStateDistributionMode


@dataclass(frozen=True, slots=True)
class OperatorStateHandle(StateObject):
    """Operator (non-keyed) state: named lists whose entries start at known offsets."""

    Mode = OperatorStateDistributionMode
    MetaInfo = StateMetaInfo

    state_name_to_partition_offsets: Mapping[str, StateMetaInfo]
    delegate: StreamStateHandle

    @property
    def state_size(self) -> int:
        return self.delegate.state_size

    def discard(self) -> None:
        self.delegate.discard()

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.state_name_to_partition_offsets)), self.delegate))


def discard_quietly(objects: object) -> None:
    """Discard each state object, continuing past failures (Flink's bestEffortDiscard)."""
    import logging

    for obj in objects:  # type: ignore[attr-defined]
        try:
            obj.discard()
        except Exception:
            logging.getLogger(__name__).warning("Could not discard %r", obj, exc_info=True)
