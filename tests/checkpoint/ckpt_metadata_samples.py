"""Sample handles and metadata shared by the metadata, store and retention tests."""

from __future__ import annotations

from sparkpoint.checkpoint.handles import (
    ByteStreamStateHandle,
    FileStateHandle,
    HandleAndLocalPath,
    IncrementalRemoteKeyedStateHandle,
    KeyGroupRangeOffsets,
    KeyGroupsSavepointStateHandle,
    KeyGroupsStateHandle,
    OperatorStateHandle,
    PlaceholderStreamStateHandle,
    RelativeFileStateHandle,
    StateMetaInfo,
)
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.metadata import (
    CheckpointMetadata,
    MasterState,
    OperatorState,
    OperatorSubtaskState,
)
from sparkpoint.checkpoint.properties import CheckpointProperties

EXCLUSIVE_DIR = "/data/chk/job/chk-7"


def key_groups_handle(start: int = 0, end: int = 3, inline: bool = True) -> KeyGroupsStateHandle:
    """A full keyed snapshot over ``[start, end]`` with increasing offsets."""
    kgr = KeyGroupRange(start, end)
    offsets = tuple(10 * i for i in range(len(kgr)))
    delegate = (
        ByteStreamStateHandle(f"kg-{start}-{end}", bytes(range(40)))
        if inline
        else FileStateHandle(f"{EXCLUSIVE_DIR}/kg-{start}-{end}", 4096)
    )
    return KeyGroupsStateHandle(KeyGroupRangeOffsets(kgr, offsets), delegate, f"id-{start}")


def every_handle_subtask() -> OperatorSubtaskState:
    """A subtask state holding at least one of every handle type."""
    savepoint = KeyGroupsSavepointStateHandle(
        KeyGroupRangeOffsets(KeyGroupRange(4, 5), (0, 17)),
        RelativeFileStateHandle(f"{EXCLUSIVE_DIR}/sp-file", 99, "sp-file"),
    )
    incremental = IncrementalRemoteKeyedStateHandle(
        backend_identifier="backend-uuid",
        range=KeyGroupRange(6, 9),
        checkpoint_id=7,
        shared_state=(
            HandleAndLocalPath(FileStateHandle("/data/chk/job/shared/a.sst", 1000), "000001.sst"),
            HandleAndLocalPath(
                PlaceholderStreamStateHandle("/data/chk/job/shared/b.sst", 2000), "000002.sst"
            ),
        ),
        private_state=(
            HandleAndLocalPath(ByteStreamStateHandle("MANIFEST", b"manifest"), "MANIFEST-000003"),
        ),
        meta_state_handle=ByteStreamStateHandle("meta", b"\x00meta\xff"),
        checkpointed_size=1234,
        state_handle_id="inc-1",
    )
    operator = OperatorStateHandle(
        {
            "offsets": StateMetaInfo((0, 8, 16), OperatorStateHandle.Mode.SPLIT_DISTRIBUTE),
            "union": StateMetaInfo((24,), OperatorStateHandle.Mode.UNION),
            "bcast": StateMetaInfo((), OperatorStateHandle.Mode.BROADCAST),
        },
        FileStateHandle("/data/chk/job/chk-7/op-file", 321),
    )
    raw_operator = OperatorStateHandle({}, ByteStreamStateHandle("raw-op", b""))
    return OperatorSubtaskState(
        managed_keyed_state=(key_groups_handle(0, 3), incremental),
        raw_keyed_state=(savepoint, key_groups_handle(10, 10, inline=False)),
        managed_operator_state=(operator,),
        raw_operator_state=(raw_operator,),
    )


def sample_metadata(checkpoint_id: int = 7) -> CheckpointMetadata:
    """A metadata value with two operators, coordinator state, master states and properties."""
    op1 = OperatorState(
        "source-1",
        parallelism=2,
        max_parallelism=128,
        subtask_states={1: every_handle_subtask(), 0: OperatorSubtaskState(finished=True)},
        coordinator_state=ByteStreamStateHandle("coord", b'{"splits":[1,2]}'),
    )
    op2 = OperatorState("keyed-agg", 4, 128, {})
    return CheckpointMetadata(
        checkpoint_id,
        (op1, op2),
        (
            MasterState.from_json("source-positions", {"kafka": {"0": 17, "1": 4}}),
            MasterState("hook", 3, b"\x00\x01\x02"),
        ),
        CheckpointProperties.RETAIN_ON_CANCELLATION,
    )
