"""The logical content of ``_metadata``: operator states, subtask handles and master states.

Source positions and other coordinator-side state are stored by the runtime as
``MasterState`` bytes (JSON via ``MasterState.from_json``) or as an operator's
``coordinator_state``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from sparkpoint.checkpoint.handles import (
    ByteStreamStateHandle,
    KeyedStateHandle,
    OperatorStateHandle,
    StateObject,
    discard_quietly,
)
from sparkpoint.checkpoint.json_nesting import check_json_nesting
from sparkpoint.errors import MetadataFormatError

if TYPE_CHECKING:
    from sparkpoint.checkpoint.properties import CheckpointProperties
    from sparkpoint.checkpoint.shared_registry import SharedStateRegistry

__all__ = ["CheckpointMetadata", "MasterState", "OperatorState", "OperatorSubtaskState"]


@dataclass(frozen=True, slots=True)
class OperatorSubtaskState:
    """The state handles one subtask of one operator reported for a checkpoint."""

    managed_keyed_state: tuple[KeyedStateHandle, ...] = ()
    raw_keyed_state: tuple[KeyedStateHandle, ...] = ()
    managed_operator_state: tuple[OperatorStateHandle, ...] = ()
    raw_operator_state: tuple[OperatorStateHandle, ...] = ()
    finished: bool = False

    def __post_init__(self) -> None:
        for name in (
            "managed_keyed_state",
            "raw_keyed_state",
            "managed_operator_state",
            "raw_operator_state",
        ):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))

    def all_handles(self) -> Iterator[StateObject]:
        """Every handle of the subtask, keyed first."""
        yield from self.managed_keyed_state
        yield from self.raw_keyed_state
        yield from self.managed_operator_state
        yield from self.raw_operator_state

    @property
    def state_size(self) -> int:
        """Total bytes of all handles (no I/O)."""
        return sum(h.state_size for h in self.all_handles())

    def has_state(self) -> bool:
        """Whether the subtask reported any handle."""
        return any(True for _ in self.all_handles())

    def discard(self) -> None:
        """Discard every handle (shared parts of incremental handles are left to the registry)."""
        discard_quietly(list(self.all_handles()))

    def register_shared_states(
        self, registry: SharedStateRegistry, checkpoint_id: int
    ) -> OperatorSubtaskState:
        """Register shared keyed state; returns the state with placeholders resolved."""
        return dataclasses.replace(
            self,
            managed_keyed_state=tuple(
                h.register_shared_states(registry, checkpoint_id) for h in self.managed_keyed_state
            ),
            raw_keyed_state=tuple(
                h.register_shared_states(registry, checkpoint_id) for h in self.raw_keyed_state
            ),
        )


@dataclass(frozen=True, slots=True)
class OperatorState:
    """All subtask states of one operator, keyed by subtask index, plus coordinator state."""

    operator_id: str
    parallelism: int
    max_parallelism: int
    subtask_states: Mapping[int, OperatorSubtaskState] = field(default_factory=dict, hash=False)
    coordinator_state: ByteStreamStateHandle | None = None

    def __post_init__(self) -> None:
        if self.parallelism < 1:
            raise ValueError(f"Operator {self.operator_id}: parallelism must be >= 1")
        if self.max_parallelism < self.parallelism:
            raise ValueError(
                f"Operator {self.operator_id}: max parallelism {self.max_parallelism} is below "
                f"parallelism {self.parallelism}"
            )
        for index in self.subtask_states:
            if not 0 <= index < self.parallelism:
                raise ValueError(
                    f"Operator {self.operator_id}: subtask index {index} outside "
                    f"[0, {self.parallelism})"
                )
        object.__setattr__(
            self, "subtask_states", MappingProxyType(dict(sorted(self.subtask_states.items())))
        )

    @property
    def state_size(self) -> int:
        """Total bytes of subtask and coordinator state (no I/O)."""
        coordinator = self.coordinator_state.state_size if self.coordinator_state else 0
        return coordinator + sum(s.state_size for s in self.subtask_states.values())

    @property
    def is_fully_finished(self) -> bool:
        """Whether every subtask reported that it had finished."""
        states = self.subtask_states
        return len(states) == self.parallelism and all(s.finished for s in states.values())

    def discard(self) -> None:
        """Discard every subtask's handles and the coordinator state."""
        for state in self.subtask_states.values():
            state.discard()
        if self.coordinator_state is not None:
            self.coordinator_state.discard()

    def register_shared_states(
        self, registry: SharedStateRegistry, checkpoint_id: int
    ) -> OperatorState:
        """Register the shared state of every subtask; returns the resolved operator state."""
        return dataclasses.replace(
            self,
            subtask_states={
                i: s.register_shared_states(registry, checkpoint_id)
                for i, s in self.subtask_states.items()
            },
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OperatorState):
            return NotImplemented
        return (
            self.operator_id == other.operator_id
            and self.parallelism == other.parallelism
            and self.max_parallelism == other.max_parallelism
            and dict(self.subtask_states) == dict(other.subtask_states)
            and self.coordinator_state == other.coordinator_state
            and _same_bytes(self.coordinator_state, other.coordinator_state)
        )

    def __hash__(self) -> int:
        return hash((self.operator_id, self.parallelism, self.max_parallelism))


def _same_bytes(a: ByteStreamStateHandle | None, b: ByteStreamStateHandle | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and a.data == b.data)


@dataclass(frozen=True, slots=True)
class MasterState:
    """Opaque state of a coordinator-side hook (e.g. source positions): name, version, bytes."""

    name: str
    version: int
    data: bytes

    @staticmethod
    def from_json(name: str, value: Any, version: int = 1) -> MasterState:
        """A master state holding ``value`` (JSON-able) as compact, key-sorted UTF-8 JSON."""
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
        return MasterState(name, version, text.encode("utf-8"))

    def to_json(self) -> Any:
        """The JSON value stored by ``from_json``; ``MetadataFormatError`` naming the state
        when the bytes are not UTF-8 JSON nested at most ``MAX_JSON_DEPTH`` deep."""
        try:
            check_json_nesting(self.data)
            return json.loads(self.data.decode("utf-8"))
        except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
            raise MetadataFormatError(
                f"Master state {self.name!r} ({len(self.data)} bytes) is not readable JSON: {e}"
            ) from None


@dataclass(frozen=True, slots=True)
class CheckpointMetadata:
    """Everything ``_metadata`` holds for one checkpoint or savepoint."""

    checkpoint_id: int
    operator_states: tuple[OperatorState, ...] = ()
    master_states: tuple[MasterState, ...] = ()
    properties: CheckpointProperties | None = None
    # The _metadata format version it was read from (None: built in memory). Version 1
    # predates PyFlink's key groups (``state/key_groups.py``): its keyed state cannot be
    # restored by this release, only read.
    format_version: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.checkpoint_id < 0:
            raise ValueError(f"checkpoint_id must be >= 0, got {self.checkpoint_id}")
        object.__setattr__(self, "operator_states", tuple(self.operator_states))
        object.__setattr__(self, "master_states", tuple(self.master_states))
        seen: set[str] = set()
        for op in self.operator_states:
            if op.operator_id in seen:
                raise ValueError(f"Operator id {op.operator_id!r} appears twice")
            seen.add(op.operator_id)

    @property
    def state_size(self) -> int:
        """Total bytes of all operator states (no I/O)."""
        return sum(op.state_size for op in self.operator_states)

    def get_operator_state(self, operator_id: str) -> OperatorState | None:
        """The state of ``operator_id`` (``None`` if the checkpoint has none)."""
        for op in self.operator_states:
            if op.operator_id == operator_id:
                return op
        return None

    def get_master_state(self, name: str) -> MasterState | None:
        """The master state called ``name`` (``None`` if absent)."""
        for ms in self.master_states:
            if ms.name == name:
                return ms
        return None
