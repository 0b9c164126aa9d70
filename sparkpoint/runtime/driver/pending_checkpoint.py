"""``PendingCheckpoint``: a triggered checkpoint collecting its subtasks' acknowledgements
and assembling them into the operator states of ``_metadata`` (Flink's
``PendingCheckpoint``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sparkpoint.checkpoint.handles import StateObject
from sparkpoint.checkpoint.metadata import MasterState, OperatorState, OperatorSubtaskState
from sparkpoint.checkpoint.properties import CheckpointProperties
from sparkpoint.checkpoint.storage import CheckpointStorageLocation
from sparkpoint.errors import CheckpointException, CheckpointFailureReason
from sparkpoint.runtime.driver.master_state import JobMasterState
from sparkpoint.runtime.graph import Stage
from sparkpoint.runtime.protocol import SnapshotAck, UploadState, UploadStatus

__all__ = ["PendingCheckpoint", "UploadsTaken"]

_SubtaskKey = tuple[str, int]  # (operator id, subtask)


class UploadsTaken(NamedTuple):
    """What the upload statuses of one epoch did to an asynchronous checkpoint."""

    failure: tuple[CheckpointFailureReason, str] | None  # why it cannot complete
    done: int  # uploads acknowledged now
    running: int  # uploads looked at and still running


@dataclass
class PendingCheckpoint:
    """A triggered checkpoint waiting for its epoch's snapshots.

    An asynchronous checkpoint outlives its epoch: ``master_state`` is the job's state as
    of ``epoch`` (taken when the epoch ended), ``acks`` the snapshots received so far and
    ``awaiting`` the (operator id, subtask) pairs whose background upload has not ended.
    """

    checkpoint_id: int
    timestamp_ms: int
    trigger_monotonic_ms: int
    location: CheckpointStorageLocation
    properties: CheckpointProperties
    epoch: int
    asynchronous: bool = False
    # Changelog checkpoints: whether keyed subtasks snapshot (materialize) for it.
    materialize: bool = True
    # ... and whether its epoch starts a background materialization instead.
    materialize_in_background: bool = False
    master_state: JobMasterState | None = None
    acks: list[SnapshotAck] = field(default_factory=list)
    awaiting: set[_SubtaskKey] = field(default_factory=set)

    def acks_handles(self) -> list[StateObject]:
        """The state handles received so far (discarded when the checkpoint is aborted)."""
        return [a.handle for a in self.acks if a.handle is not None]

    def expired(self, now_monotonic_ms: int, timeout_ms: int) -> bool:
        """Whether the checkpoint has been running longer than ``timeout_ms``."""
        return now_monotonic_ms - self.trigger_monotonic_ms > timeout_ms

    def acknowledge_epoch(
        self,
        master_state: JobMasterState,
        acks: Iterable[SnapshotAck],
        keyed_subtasks: set[_SubtaskKey],
    ) -> None:
        """Its epoch was accepted with the job's ``master_state`` and the snapshots
        ``acks``; an asynchronous checkpoint then awaits the upload of every keyed subtask
        in ``keyed_subtasks`` that acknowledged none."""
        self.master_state = master_state
        self.acks = list(acks)
        if self.asynchronous:
            self.awaiting = keyed_subtasks - {
                (a.operator_id, a.subtask) for a in self.acks if not a.operator_state
            }

    def acknowledge_uploads(
        self, statuses: Mapping[tuple[int, str, int], UploadStatus]
    ) -> UploadsTaken:
        """Take the statuses (by checkpoint id, operator id, subtask) of the uploads it
        awaits, in subtask order: a finished one acknowledges its subtask; a failed or lost
        one (or none reported) fails the checkpoint, and the rest are not looked at."""
        done = running = 0
        for op, sub in sorted(self.awaiting):
            status = statuses.get((self.checkpoint_id, op, sub))
            if status is None or status.state == UploadState.LOST:
                detail = status.detail if status is not None else "no record of it"
                failure = (
                    CheckpointFailureReason.TASK_FAILURE,
                    f"upload of {op}#{sub} lost: {detail}",
                )
                return UploadsTaken(failure, done, running)
            if status.state == UploadState.FAILED:
                failure = (
                    CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION,
                    f"upload of {op}#{sub} failed: {status.detail}",
                )
                return UploadsTaken(failure, done, running)
            if status.state == UploadState.DONE:
                self.acks.append(SnapshotAck(op, sub, status.handle, status.state_size))
                self.awaiting.discard((op, sub))
                done += 1
            else:
                running += 1
        return UploadsTaken(None, done, running)

    def master_states(self) -> list[MasterState]:
        """The master states its ``_metadata`` stores (the job master's, once its epoch
        was accepted)."""
        return [] if self.master_state is None else [self.master_state.to_master_state()]

    def operator_states(self, stages: Sequence[Stage]) -> list[OperatorState]:
        """The operator states of ``_metadata`` from the acknowledged snapshots: one per
        operator with keyed or operator state, every subtask present.

        Raises ``CheckpointException`` (declined) when some subtask sent no snapshot.
        """
        # The handles as acknowledged: keyed or operator state handles, per ``operator_state``
        keyed: dict[str, dict[int, tuple[Any, ...]]] = {}
        operator: dict[str, dict[int, tuple[Any, ...]]] = {}
        for ack in self.acks:
            table = operator if ack.operator_state else keyed
            handles = (ack.handle,) if ack.handle is not None else ()
            table.setdefault(ack.operator_id, {})[ack.subtask] = handles
        states = []
        for st in stages:
            keyed_ids = {n.operator_id for n in st.keyed_nodes}
            operator_ids = {n.operator_id for n in st.operator_state_nodes}
            for node in st.members:
                op_id = node.operator_id
                if op_id not in keyed_ids and op_id not in operator_ids:
                    continue
                k, o = keyed.get(op_id, {}), operator.get(op_id, {})
                missing = [
                    i
                    for i in range(st.parallelism)
                    if (op_id in keyed_ids and i not in k) or (op_id in operator_ids and i not in o)
                ]
                if missing:
                    raise CheckpointException(
                        CheckpointFailureReason.CHECKPOINT_DECLINED,
                        f"operator {op_id}: no snapshot from subtasks {missing}",
                    )
                subs = {
                    i: OperatorSubtaskState(
                        managed_keyed_state=k.get(i, ()), managed_operator_state=o.get(i, ())
                    )
                    for i in range(st.parallelism)
                }
                states.append(OperatorState(op_id, st.parallelism, st.max_parallelism, subs))
        return states
