"""The operator (broadcast) state of one subtask for one epoch, carried through the driver.

Operator state is not pinned to an executor as keyed state is: a broadcast operator's
subtask may run anywhere. The subtask starts each epoch from the handles in the
``EpochSpec`` (what its accepted run of the previous epoch ended with, or a checkpoint's
handles redistributed by ``state.operator_repartition``), opens them in the state backend's
operator-state backend, and at the end of the epoch snapshots it twice: into memory for the
driver (``CarriedState``, which the driver keeps only from accepted runs) and, when the
epoch carries a checkpoint, into the checkpoint's storage (``SnapshotAck``). Nothing is
committed on the executor, so a retried, discarded or restored run starts again from the
same state.
"""

from __future__ import annotations

from typing import Any

from sparkpoint.checkpoint.mem_streams import MemCheckpointStreamFactory
from sparkpoint.runtime.graph import Stage
from sparkpoint.runtime.protocol import CarriedState, EpochSpec, SnapshotAck
from sparkpoint.state.backend import OperatorStateBackend

__all__ = ["SubtaskOperatorState"]

# Carried state travels in task reports and epoch specs: no cap of its own (the memory
# checkpoint storage's 5 MiB cap is about _metadata, not this).
_CARRY = MemCheckpointStreamFactory(2**62)


class SubtaskOperatorState:
    """The operator-state backends of one subtask's broadcast operators for one epoch."""

    def __init__(self, spec: EpochSpec, stage: Stage, subtask: int) -> None:
        self.spec = spec
        self.subtask = subtask
        factory = spec.job.state_backend
        self.backends: dict[str, OperatorStateBackend] = {}
        for node in stage.operator_state_nodes:
            op_id = node.operator_id
            handles = spec.operator_state.get(op_id, {}).get(subtask, ())
            self.backends[op_id] = factory.create_operator_state_backend(list(handles))

    def backend(self, operator_id: str) -> OperatorStateBackend:
        """The operator-state backend of ``operator_id``."""
        return self.backends[operator_id]

    def snapshot(self) -> tuple[list[CarriedState], list[SnapshotAck]]:
        """The state to carry into the next epoch and, when the epoch carries a checkpoint,
        the snapshot acknowledgements for it."""
        carried: list[CarriedState] = []
        acks: list[SnapshotAck] = []
        cp = self.spec.checkpoint
        factory: Any = None
        for op_id, backend in self.backends.items():
            carried.append(CarriedState(op_id, self.subtask, backend.snapshot(_CARRY)))
            if cp is None:
                continue
            if factory is None:
                access = cp.storage.create_checkpoint_storage(self.spec.job.job_id)
                factory = access.resolve_checkpoint_storage_location(
                    cp.checkpoint_id, cp.location_reference
                )
            handle = backend.snapshot(factory)
            size = handle.state_size if handle is not None else 0
            acks.append(SnapshotAck(op_id, self.subtask, handle, size, operator_state=True))
        return carried, acks
