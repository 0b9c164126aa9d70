"""Malformed nesting in a ``_metadata`` is a ``MetadataFormatError`` (issue 39, item 6): a
changelog handle materialized as another changelog handle, 100,000 deep, and master states
holding JSON nested 100,000 deep used to raise an uncaught ``RecursionError``.

The payloads are written with the real payload writer and frame, as a crafted file would be.
"""

from __future__ import annotations

import json

import pytest

from sparkpoint.checkpoint.json_nesting import MAX_JSON_DEPTH, check_json_nesting
from sparkpoint.checkpoint.metadata import CheckpointMetadata, MasterState
from sparkpoint.checkpoint.metadata.file_format import encode_frame, load_checkpoint_metadata
from sparkpoint.checkpoint.metadata.payload_io import PayloadWriter
from sparkpoint.checkpoint.metadata.serializer import HandleType
from sparkpoint.checkpoint.metadata.serializers import CURRENT_VERSION
from sparkpoint.errors import MetadataFormatError
from sparkpoint.runtime.driver.master_state import MASTER_STATE_NAME, JobMasterState
from sparkpoint.state.key_hash_rules import KEY_HASH_MASTER_STATE, recorded_key_hash_rules

DEEP = 100_000


def nested_changelog_handles(depth: int) -> bytes:
    """A complete ``_metadata``: one operator, one subtask, one keyed handle that is a
    changelog handle materialized as a changelog handle ... ``depth`` levels deep."""
    w = PayloadWriter()
    w.i64(5)  # checkpoint id
    w.u8(0)  # no properties
    w.u32(0)  # no master states
    w.u32(1)  # one operator
    w.text("op")
    w.i32(1)
    w.i32(8)
    w.u8(HandleType.NULL)  # no coordinator state
    w.u32(1)  # one subtask
    w.i32(0)
    w.u8(0)
    w.u32(1)  # one managed keyed handle ...
    for _ in range(depth):
        w.u8(HandleType.CHANGELOG_KEYED)
        w.text("heap")
        w.i32(0)
        w.i32(8)
        w.i64(5)
        w.i64(4)
        w.u32(1)  # ... materialized as the next level
    w.u8(HandleType.NULL)
    return encode_frame(CURRENT_VERSION, bytes(w.buf))


def test_changelog_handles_nested_deep_are_a_metadata_format_error() -> None:
    data = nested_changelog_handles(DEEP)
    with pytest.raises(MetadataFormatError) as e:
        load_checkpoint_metadata(data, "/snapshots/chk-5", "/snapshots/chk-5/_metadata")
    assert str(e.value).startswith(
        "Invalid checkpoint metadata file /snapshots/chk-5/_metadata: malformed payload at "
        "byte offset "
    )
    assert str(e.value).endswith(": a changelog handle's materialization must be a snapshot")


def deep_json(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def with_master_state(name: str, data: bytes) -> CheckpointMetadata:
    return CheckpointMetadata(3, (), (MasterState(name, 1, data),))


def test_a_master_state_nested_deep_is_a_metadata_format_error() -> None:
    state = MasterState(MASTER_STATE_NAME, 1, deep_json(DEEP))
    with pytest.raises(MetadataFormatError) as e:
        state.to_json()
    assert str(e.value) == (
        f"Master state 'sparkpoint.job' ({2 * DEEP} bytes) is not readable JSON: JSON nested "
        f"more than {MAX_JSON_DEPTH} levels deep (at most {MAX_JSON_DEPTH})"
    )


def test_the_job_master_state_nested_deep_fails_the_restore_with_a_named_error() -> None:
    metadata = with_master_state(MASTER_STATE_NAME, deep_json(DEEP))
    with pytest.raises(MetadataFormatError, match=r"Master state 'sparkpoint\.job'"):
        JobMasterState.from_metadata(metadata)


def test_the_key_hash_master_state_nested_deep_is_a_named_error() -> None:
    nested = b'{"operators": ' + deep_json(DEEP) + b"}"
    metadata = with_master_state(KEY_HASH_MASTER_STATE, nested)
    with pytest.raises(MetadataFormatError, match=r"Master state 'sparkpoint\.key-hash'"):
        recorded_key_hash_rules(metadata)


def test_master_states_as_sparkpoint_writes_them_still_read() -> None:
    value = {"a": [1, {"b": [[2], "[[[[{"]}], "s": "]]]}"}
    assert MasterState.from_json("x", value).to_json() == value
    check_json_nesting(json.dumps(deep_json(MAX_JSON_DEPTH).decode()))  # brackets in a string
    check_json_nesting(deep_json(MAX_JSON_DEPTH))
    with pytest.raises(ValueError, match=f"more than {MAX_JSON_DEPTH} levels"):
        check_json_nesting(deep_json(MAX_JSON_DEPTH + 1))
