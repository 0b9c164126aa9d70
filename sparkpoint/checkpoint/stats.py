"""``CheckpointStats``: what one checkpoint took and wrote, overall and per subtask.

The coordinator measures a checkpoint when every snapshot is in and stores the figures in
the checkpoint's own ``_metadata`` (the ``sparkpoint.checkpoint-stats`` master state), so
the history of retained checkpoints can be read from storage after the job is gone
(``sparkpoint checkpoints history``) and equals what the job client showed live. A
``_metadata`` written before these figures existed has no such master state: its sizes are
measured again from its handles (``measure``), its timings are unknown.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.checkpoint.handles import (
    ByteStreamStateHandle,
    ChangelogStateBackendHandle,
    IncrementalRemoteKeyedStateHandle,
    KeyGroupsStateHandle,
    OperatorStateHandle,
    PlaceholderStreamStateHandle,
    StateObject,
    StreamStateHandle,
)
from sparkpoint.checkpoint.metadata import CheckpointMetadata, MasterState, OperatorState
from sparkpoint.errors import MetadataFormatError

__all__ = [
    "STATS_MASTER_STATE",
    "CheckpointStats",
    "SubtaskStats",
    "format_bytes",
    "measure",
    "stats_from_metadata",
    "written_bytes",
]

STATS_MASTER_STATE = "sparkpoint.checkpoint-stats"


@dataclass
class SubtaskStats:
    """The state one subtask of one operator wrote into a checkpoint."""

    operator_id: str
    subtask: int
    state_size: int = 0
    checkpointed_size: int = 0
    inline_bytes: int = 0
    files_written: int = 0

    def to_json(self) -> dict[str, Any]:
        """The figures as JSON (stored in ``_metadata``, printed by the history command)."""
        return {
            "operator_id": self.operator_id,
            "subtask": self.subtask,
            "state_size": self.state_size,
            "checkpointed_size": self.checkpointed_size,
            "inline_bytes": self.inline_bytes,
            "files": self.files_written,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> SubtaskStats:
        """Read back ``to_json``."""
        return SubtaskStats(
            str(data["operator_id"]),
            int(data["subtask"]),
            int(data.get("state_size", 0)),
            int(data.get("checkpointed_size", 0)),
            int(data.get("inline_bytes", 0)),
            int(data.get("files", 0)),
        )


@dataclass
class CheckpointStats:
    """What happened to one checkpoint (also logged; failed ones exist only live).

    ``state_size`` is the full size of the state the checkpoint references (Flink's "full
    checkpoint data size"); ``checkpointed_size`` the bytes written for this checkpoint
    (smaller for an incremental RocksDB checkpoint, which references earlier uploads);
    ``inline_bytes`` the part stored inside ``_metadata``; ``files_written`` the state
    files written. ``duration_ms`` runs from the trigger to
    the moment ``_metadata`` is written (the epoch's Spark job included).
    """

    checkpoint_id: int
    is_savepoint: bool
    trigger_timestamp_ms: int
    status: str = "IN_PROGRESS"
    duration_ms: int = 0
    state_size: int = 0
    inline_bytes: int = 0
    files_written: int = 0
    external_pointer: str | None = None
    failure: str | None = None
    epoch: int = 0
    checkpointed_size: int = 0
    subtasks: list[SubtaskStats] = field(default_factory=list)

    def copy(self) -> CheckpointStats:
        """A copy that stays as it is (the coordinator completes statistics in place)."""
        return dataclasses.replace(self, subtasks=list(self.subtasks))

    def add_measurement(self, operator_states: Sequence[OperatorState]) -> None:
        """Set the sizes (total and per subtask) from the states the subtasks handed in."""
        self.subtasks = measure(operator_states)
        self.state_size = sum(s.state_size for s in self.subtasks)
        self.checkpointed_size = sum(s.checkpointed_size for s in self.subtasks)
        self.inline_bytes = sum(s.inline_bytes for s in self.subtasks)
        self.files_written = sum(s.files_written for s in self.subtasks)

    def to_json(self) -> dict[str, Any]:
        """One checkpoint as JSON (``sparkpoint checkpoints history --json``, the dashboard)."""
        return {
            "id": self.checkpoint_id,
            "savepoint": self.is_savepoint,
            "status": self.status,
            "epoch": self.epoch,
            "trigger_timestamp_ms": self.trigger_timestamp_ms,
            "duration_ms": self.duration_ms,
            "state_size": self.state_size,
            "checkpointed_size": self.checkpointed_size,
            "inline_bytes": self.inline_bytes,
            "files": self.files_written,
            "external_pointer": self.external_pointer,
            "failure": self.failure,
            "subtasks": [s.to_json() for s in self.subtasks],
        }

    def to_master_state(self) -> MasterState:
        """The figures stored in ``_metadata`` (no status or pointer: both follow from the
        file's existence and place)."""
        data = self.to_json()
        for volatile in ("status", "external_pointer", "failure"):
            del data[volatile]
        return MasterState.from_json(STATS_MASTER_STATE, data)


def _count(handle: StateObject | None, into: SubtaskStats) -> None:
    """Add the bytes written this time (inline or in files) and the files of ``handle``."""
    if handle is None:
        return
    if isinstance(handle, KeyGroupsStateHandle | OperatorStateHandle):
        _count(handle.delegate, into)
    elif isinstance(handle, IncrementalRemoteKeyedStateHandle):
        _count(handle.meta_state_handle, into)
        for part in (*handle.shared_state, *handle.private_state):
            _count(part.handle, into)
    elif isinstance(handle, ChangelogStateBackendHandle):
        # Only what this checkpoint wrote: its materialization, if new, and its new entries.
        if handle.materialized_here:
            for materialized in handle.materialized:
                _count(materialized, into)
        for entry in handle.new_changelog:
            _count(entry, into)
    elif isinstance(handle, PlaceholderStreamStateHandle):
        return  # uploaded by an earlier checkpoint
    elif isinstance(handle, ByteStreamStateHandle):
        into.checkpointed_size += handle.state_size
        into.inline_bytes += handle.state_size
    elif isinstance(handle, StreamStateHandle):
        into.checkpointed_size += handle.state_size
        into.files_written += 1


def written_bytes(handle: StateObject | None) -> int:
    """Bytes ``handle`` wrote itself, inline or in files (reused files count zero)."""
    one = SubtaskStats("", 0)
    _count(handle, one)
    return one.checkpointed_size


def measure(operator_states: Iterable[OperatorState]) -> list[SubtaskStats]:
    """Per subtask of every operator: bytes, inline bytes and files of its handles."""
    out: list[SubtaskStats] = []
    for op in operator_states:
        for index in sorted(op.subtask_states):
            sub = op.subtask_states[index]
            one = SubtaskStats(op.operator_id, index)
            for handle in (*sub.managed_keyed_state, *sub.managed_operator_state):
                one.state_size += handle.state_size
                _count(handle, one)
            out.append(one)
    return out


def stats_from_metadata(
    metadata: CheckpointMetadata, external_pointer: str | None = None
) -> CheckpointStats:
    """The statistics a completed checkpoint's ``_metadata`` records (sizes measured from
    its handles when it predates stored statistics; then the trigger time and duration
    are -1: unknown). Stored figures of the wrong type or range are a
    ``MetadataFormatError`` naming the field and ``external_pointer``."""
    props = metadata.properties
    is_savepoint = bool(props is not None and props.is_savepoint)
    stored = metadata.get_master_state(STATS_MASTER_STATE)
    if stored is None:
        stats = CheckpointStats(metadata.checkpoint_id, is_savepoint, -1, "COMPLETED", -1)
        stats.add_measurement(metadata.operator_states)
        stats.external_pointer = external_pointer
        return stats
    data = _stored_json(stored, external_pointer)
    field_of = _Fields(data, f"{STATS_MASTER_STATE} in {external_pointer or 'the checkpoint'}")
    subtasks = field_of.value("subtasks", list, [])
    return CheckpointStats(
        checkpoint_id=metadata.checkpoint_id,
        is_savepoint=field_of.value("savepoint", bool, is_savepoint),
        trigger_timestamp_ms=field_of.integer("trigger_timestamp_ms", -1, -1, _MAX_TIMESTAMP_MS),
        status="COMPLETED",
        duration_ms=field_of.integer("duration_ms", -1, -1),
        state_size=field_of.integer("state_size", 0),
        inline_bytes=field_of.integer("inline_bytes", 0),
        files_written=field_of.integer("files", 0),
        external_pointer=external_pointer,
        epoch=field_of.integer("epoch", 0),
        checkpointed_size=field_of.integer("checkpointed_size", 0),
        subtasks=[_stored_subtask(s, i, field_of.where) for i, s in enumerate(subtasks)],
    )


_MAX_I64 = 2**63 - 1
_MAX_TIMESTAMP_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: the last instant a date can print."""


def _stored_json(stored: MasterState, where: str | None) -> dict[str, Any]:
    try:
        data = stored.to_json()
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise MetadataFormatError(
            f"Invalid {STATS_MASTER_STATE} in {where or 'the checkpoint'}: not JSON ({exc})"
        ) from None
    if not isinstance(data, dict):
        raise MetadataFormatError(
            f"Invalid {STATS_MASTER_STATE} in {where or 'the checkpoint'}: a JSON object is "
            f"expected, found {type(data).__name__}"
        )
    return data


_MISSING: Any = object()


class _Fields:
    """Typed reads of one JSON object of stored statistics; a missing field takes its
    default, a field of the wrong type or range is a ``MetadataFormatError`` naming it."""

    def __init__(self, data: dict[str, Any], where: str) -> None:
        self.data = data
        self.where = where

    def _get(self, name: str, default: Any) -> Any:
        if name in self.data:
            return self.data[name]
        if default is _MISSING:
            raise MetadataFormatError(f"Invalid {self.where}: field {name!r} is missing")
        return default

    def value(self, name: str, kind: type, default: Any = _MISSING) -> Any:
        """The field ``name`` when it is a ``kind``."""
        value = self._get(name, default)
        if not isinstance(value, kind):
            raise MetadataFormatError(
                f"Invalid {self.where}: field {name!r} must be {kind.__name__}, "
                f"found {type(value).__name__} {_short(value)}"
            )
        return value

    def integer(
        self, name: str, default: int = _MISSING, minimum: int = 0, maximum: int = _MAX_I64
    ) -> int:
        """The integer field ``name`` within ``[minimum, maximum]``."""
        value = self._get(name, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise MetadataFormatError(
                f"Invalid {self.where}: field {name!r} must be an integer, "
                f"found {type(value).__name__} {_short(value)}"
            )
        if not minimum <= value <= maximum:
            raise MetadataFormatError(
                f"Invalid {self.where}: field {name!r} is {value}, outside [{minimum}, {maximum}]"
            )
        return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _stored_subtask(data: Any, index: int, where: str) -> SubtaskStats:
    if not isinstance(data, dict):
        raise MetadataFormatError(
            f"Invalid {where}: subtasks[{index}] must be an object, found {type(data).__name__}"
        )
    one = _Fields(data, f"{where}, subtasks[{index}]")
    return SubtaskStats(
        one.value("operator_id", str),
        one.integer("subtask"),
        one.integer("state_size", 0),
        one.integer("checkpointed_size", 0),
        one.integer("inline_bytes", 0),
        one.integer("files", 0),
    )


def format_bytes(n: int) -> str:
    """``n`` bytes for people: ``512 B``, ``1.5 KiB``, ``3.2 MiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")
