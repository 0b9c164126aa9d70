"""Pointer resolution: directories, _metadata files, and Flink's errors for what is missing."""

from __future__ import annotations

import re

import pytest

from sparkpoint.checkpoint.fs_location import resolve_checkpoint_pointer
from sparkpoint.errors import StorageError
from sparkpoint.fs import get_filesystem


def test_missing_pointer(storage_base: str) -> None:
    pointer = f"{storage_base}/nothing-here"
    scheme = get_filesystem(storage_base).scheme
    with pytest.raises(FileNotFoundError) as err:
        resolve_checkpoint_pointer(pointer)
    assert str(err.value) == (
        f"Cannot find checkpoint or savepoint file/directory '{pointer}' on file system '{scheme}'."
    )


def test_directory_without_metadata(storage_base: str) -> None:
    fs = get_filesystem(storage_base)
    directory = f"{storage_base}/chk-9"
    fs.mkdirs(directory)
    fs.write_atomic(f"{directory}/some-state", b"x")
    with pytest.raises(FileNotFoundError) as err:
        resolve_checkpoint_pointer(directory)
    message = str(err.value)
    assert message.startswith(f"Cannot find meta data file '_metadata' in directory '{directory}'.")
    assert "Please try to load the checkpoint/savepoint directly from the metadata file" in message


def test_file_pointer_uses_parent_as_exclusive_dir(storage_base: str) -> None:
    fs = get_filesystem(storage_base)
    directory = f"{storage_base}/savepoint-abc"
    fs.mkdirs(directory)
    fs.write_atomic(f"{directory}/_metadata", b"123")
    location = resolve_checkpoint_pointer(f"{directory}/_metadata")
    assert location.exclusive_dir == directory
    assert location.external_pointer == directory
    assert location.metadata_handle.state_size == 3


def test_invalid_pointers() -> None:
    with pytest.raises(ValueError, match="empty checkpoint pointer"):
        resolve_checkpoint_pointer("")
    with pytest.raises(ValueError, match="must be a str"):
        resolve_checkpoint_pointer(None)  # type: ignore[arg-type]
    with pytest.raises(StorageError, match=re.escape("is not a valid file URI")):
        resolve_checkpoint_pointer("://broken")
