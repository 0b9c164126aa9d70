"""The PyFlink-shaped checkpoint storage API: constructors, constants, getters, configure."""

from __future__ import annotations

import logging
import pathlib
import pickle

import pytest

from sparkpoint.checkpoint.fs_storage import FsCheckpointStorageAccess
from sparkpoint.checkpoint.mem_storage import MemCheckpointStorageAccess
from sparkpoint.checkpoint.storage import CompletedCheckpointStorageLocation, write_metadata_bytes
from sparkpoint.datastream.checkpoint_storage import (
    CheckpointStorage,
    CustomCheckpointStorage,
    FileSystemCheckpointStorage,
    JobManagerCheckpointStorage,
)

JOB = "abcdef0123456789abcdef0123456789"


def test_module_exports_pyflinks_names() -> None:
    import sparkpoint.datastream.checkpoint_storage as module

    assert module.__all__ == [
        "CheckpointStorage",
        "CustomCheckpointStorage",
        "FileSystemCheckpointStorage",
        "JobManagerCheckpointStorage",
    ]
    for cls in (JobManagerCheckpointStorage, FileSystemCheckpointStorage, CustomCheckpointStorage):
        assert issubclass(cls, CheckpointStorage)


def test_constants() -> None:
    assert JobManagerCheckpointStorage.DEFAULT_MAX_STATE_SIZE == 5 * 1024 * 1024
    assert FileSystemCheckpointStorage.MAX_FILE_STATE_THRESHOLD == 1024 * 1024


# ---- JobManagerCheckpointStorage -----------------------------------------------------


def test_jobmanager_defaults() -> None:
    storage = JobManagerCheckpointStorage()
    assert storage.get_checkpoint_path() is None
    assert storage.get_savepoint_path() is None
    assert storage.get_max_state_size() == 5 * 1024 * 1024
    assert str(storage) == (
        "JobManagerCheckpointStorage (checkpoints to JobManager) ( maxStateSize: 5242880)"
    )


def test_jobmanager_arguments_and_validation(tmp_path) -> None:  # type: ignore[no-untyped-def]
    storage = JobManagerCheckpointStorage(str(tmp_path), 1000)
    assert storage.get_checkpoint_path() == str(tmp_path)
    assert storage.get_max_state_size() == 1000
    assert JobManagerCheckpointStorage(
        checkpoint_path=pathlib.Path(tmp_path)
    ).get_checkpoint_path() == str(tmp_path)
    with pytest.raises(ValueError, match="max_state_size must be > 0"):
        JobManagerCheckpointStorage(max_state_size=0)
    with pytest.raises(ValueError, match="max_state_size must be an int"):
        JobManagerCheckpointStorage(max_state_size="5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="checkpoint_path must be a str"):
        JobManagerCheckpointStorage(checkpoint_path=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="root directory"):
        JobManagerCheckpointStorage(checkpoint_path="/")


def test_jobmanager_configure_fills_unset_paths() -> None:
    config = {"state.checkpoints.dir": "file:///ck", "state.savepoints.dir": "file:///sp"}
    configured = JobManagerCheckpointStorage().configure(config)
    assert configured.get_checkpoint_path() == "file:///ck"
    assert configured.get_savepoint_path() == "file:///sp"
    assert type(configured) is JobManagerCheckpointStorage
    mine = JobManagerCheckpointStorage("file:///mine").configure(
        {"execution.checkpointing.dir": "file:///new", "state.checkpoints.dir": "file:///old"}
    )
    assert mine.get_checkpoint_path() == "file:///mine"
    new_key_wins = JobManagerCheckpointStorage().configure(
        {"execution.checkpointing.dir": "file:///new", "state.checkpoints.dir": "file:///old"}
    )
    assert new_key_wins.get_checkpoint_path() == "file:///new"
    assert JobManagerCheckpointStorage.create_from_config(config) == configured


def test_jobmanager_creates_memory_access(tmp_path) -> None:  # type: ignore[no-untyped-def]
    access = JobManagerCheckpointStorage(max_state_size=10).create_checkpoint_storage(JOB)
    assert isinstance(access, MemCheckpointStorageAccess)
    assert access.max_state_size == 10
    persisted = JobManagerCheckpointStorage(tmp_path.as_uri()).create_checkpoint_storage(JOB)
    assert persisted.supports_highly_available_storage()


# ---- FileSystemCheckpointStorage -----------------------------------------------------


def test_filesystem_requires_path() -> None:
    with pytest.raises(ValueError, match=r"^checkpoint_path must not be None$"):
        FileSystemCheckpointStorage()
    with pytest.raises(ValueError, match="checkpoint_path must be a str"):
        FileSystemCheckpointStorage(3.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must not be empty"):
        FileSystemCheckpointStorage("")
    with pytest.raises(ValueError, match="root directory"):
        FileSystemCheckpointStorage("s3://bucket/")


def test_filesystem_defaults() -> None:
    storage = FileSystemCheckpointStorage("s3://bucket/checkpoints")
    assert storage.get_checkpoint_path() == "s3://bucket/checkpoints"
    assert storage.get_savepoint_path() is None
    assert storage.get_min_file_size_threshold() == 20 * 1024
    assert storage.get_write_buffer_size() == 4096
    assert str(storage) == (
        "FileSystemCheckpointStorage (checkpoints: 's3://bucket/checkpoints', savepoints: "
        "'None', fileStateThreshold: -1, writeBufferSize: -1)"
    )


def test_filesystem_arguments() -> None:
    storage = FileSystemCheckpointStorage("file:///c/", 100, 8192, "file:///s")
    assert storage.get_checkpoint_path() == "file:///c"
    assert storage.get_savepoint_path() == "file:///s"
    assert storage.get_min_file_size_threshold() == 100
    assert storage.get_write_buffer_size() == 8192
    assert (
        FileSystemCheckpointStorage("/c", file_state_size_threshold=0).get_min_file_size_threshold()
        == 0
    )
    assert (
        FileSystemCheckpointStorage("/c", 1024 * 1024).get_min_file_size_threshold() == 1024 * 1024
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"file_state_size_threshold": 1024 * 1024 + 1}, r"must be in \[-1, 1048576\]"),
        ({"file_state_size_threshold": -2}, r"must be in \[-1, 1048576\]"),
        ({"write_buffer_size": -2}, "must be not less than '-1'"),
        ({"file_state_size_threshold": 1.5}, "file_state_size_threshold must be an int"),
        ({"write_buffer_size": True}, "write_buffer_size must be an int"),
        ({"savepoint_path": 7}, "savepoint_path must be a str"),
    ],
)
def test_filesystem_validation(kwargs: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError, match=message):
        FileSystemCheckpointStorage("/c", **kwargs)


def test_filesystem_configure_reads_flink_keys() -> None:
    config = {
        "execution.checkpointing.data-inline-threshold": "1kb",
        "execution.checkpointing.write-buffer-size": "16384",
        "execution.checkpointing.savepoint-dir": "file:///sp",
        "execution.checkpointing.create-subdir": "false",
    }
    configured = FileSystemCheckpointStorage("file:///c").configure(config)
    assert configured.get_min_file_size_threshold() == 1024
    assert configured.get_write_buffer_size() == 16384
    assert configured.get_savepoint_path() == "file:///sp"
    assert configured.get_create_checkpoint_sub_dir() is False
    assert type(configured) is FileSystemCheckpointStorage


@pytest.mark.parametrize(
    ("threshold_key", "buffer_key"),
    [
        ("state.storage.fs.memory-threshold", "state.storage.fs.write-buffer-size"),
        ("state.backend.fs.memory-threshold", "state.backend.fs.write-buffer-size"),
    ],
)
def test_filesystem_configure_deprecated_keys(threshold_key: str, buffer_key: str) -> None:
    configured = FileSystemCheckpointStorage("/c").configure(
        {threshold_key: "2 kb", buffer_key: "1024", "state.savepoints.dir": "/sp"}
    )
    assert configured.get_min_file_size_threshold() == 2048
    # the buffer is never smaller than the threshold
    assert configured.get_write_buffer_size() == 2048
    assert configured.get_savepoint_path() == "/sp"


def test_filesystem_configure_keeps_explicit_values() -> None:
    storage = FileSystemCheckpointStorage("/c", 10, 100, "/mine")
    configured = storage.configure(
        {
            "execution.checkpointing.data-inline-threshold": "1kb",
            "execution.checkpointing.write-buffer-size": "999",
            "execution.checkpointing.savepoint-dir": "/other",
        }
    )
    assert configured.get_min_file_size_threshold() == 10
    assert configured.get_write_buffer_size() == 100
    assert configured.get_savepoint_path() == "/mine"
    assert storage.get_min_file_size_threshold() == 10  # configure returns a copy


def test_filesystem_configure_defaults_and_invalid_threshold(caplog) -> None:  # type: ignore[no-untyped-def]
    configured = FileSystemCheckpointStorage("/c").configure({})
    assert configured.get_min_file_size_threshold() == 20480
    assert configured.get_write_buffer_size() == 20480  # max(4096, threshold)
    with caplog.at_level(logging.WARNING):
        big = FileSystemCheckpointStorage("/c").configure(
            {"execution.checkpointing.data-inline-threshold": "2mb"}
        )
    assert big.get_min_file_size_threshold() == 20480
    assert "Ignoring invalid file size threshold value" in caplog.text
    with pytest.raises(ValueError, match="data-inline-threshold"):
        FileSystemCheckpointStorage("/c").configure(
            {"execution.checkpointing.data-inline-threshold": "lots"}
        )


def test_filesystem_create_from_config() -> None:
    storage = FileSystemCheckpointStorage.create_from_config({"state.checkpoints.dir": "/ck"})
    assert storage.get_checkpoint_path() == "/ck"
    with pytest.raises(ValueError, match="does not specify the checkpoint directory"):
        FileSystemCheckpointStorage.create_from_config({})


def test_filesystem_creates_fs_access(tmp_path) -> None:  # type: ignore[no-untyped-def]
    storage = FileSystemCheckpointStorage(str(tmp_path), 64, 16).configure({})
    access = storage.create_checkpoint_storage(JOB)
    assert isinstance(access, FsCheckpointStorageAccess)
    assert access.checkpoints_directory == f"{tmp_path}/{JOB}"
    assert access.file_size_threshold == 64
    assert access.write_buffer_size == 64


def test_storages_pickle_and_compare(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fs_storage = FileSystemCheckpointStorage(str(tmp_path), 10, 20, "/sp")
    jm_storage = JobManagerCheckpointStorage(str(tmp_path), 99)
    for storage in (fs_storage, jm_storage):
        copy = pickle.loads(pickle.dumps(storage))
        assert copy == storage and hash(copy) == hash(storage)
    assert fs_storage != FileSystemCheckpointStorage(str(tmp_path), 11, 20, "/sp")


def test_end_to_end_through_the_public_storage(tmp_path) -> None:  # type: ignore[no-untyped-def]
    storage = FileSystemCheckpointStorage(tmp_path.as_uri()).configure({})
    access = storage.create_checkpoint_storage(JOB)
    access.initialize_base_locations_for_checkpoint()
    location = access.initialize_location_for_checkpoint(1)
    completed = write_metadata_bytes(location, b"m")
    resolved = storage.resolve_checkpoint(completed.external_pointer)
    assert resolved == completed


# ---- CustomCheckpointStorage ---------------------------------------------------------


class _UserStorage(CheckpointStorage):
    """A user's storage delegating to the file-system storage, counting calls."""

    def __init__(self, base: str) -> None:
        self.inner = FileSystemCheckpointStorage(base)
        self.calls: list[str] = []

    def create_checkpoint_storage(self, job_id: str):  # type: ignore[no-untyped-def]
        self.calls.append(f"create:{job_id}")
        return self.inner.create_checkpoint_storage(job_id)

    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation:
        self.calls.append("resolve")
        return self.inner.resolve_checkpoint(pointer)


def test_custom_storage_delegates(tmp_path) -> None:  # type: ignore[no-untyped-def]
    user = _UserStorage(str(tmp_path))
    custom = CustomCheckpointStorage(user)
    assert custom.configure({"x": "y"}) is custom
    access = custom.create_checkpoint_storage(JOB)
    access.initialize_base_locations_for_checkpoint()
    completed = write_metadata_bytes(access.initialize_location_for_checkpoint(4), b"c")
    assert (
        custom.resolve_checkpoint(completed.external_pointer).exclusive_dir
        == completed.exclusive_dir
    )
    assert user.calls == [f"create:{JOB}", "resolve"]
    assert str(custom).startswith("CustomCheckpointStorage(")


def test_custom_storage_configure_wraps_new_instance(tmp_path) -> None:  # type: ignore[no-untyped-def]
    class Configurable(_UserStorage):
        def configure(self, config):  # type: ignore[no-untyped-def]
            return Configurable(config["dir"])

    custom = CustomCheckpointStorage(Configurable(str(tmp_path)))
    configured = custom.configure({"dir": "/elsewhere"})
    assert isinstance(configured, CustomCheckpointStorage)
    assert configured.user_storage.inner.get_checkpoint_path() == "/elsewhere"


def test_custom_storage_rejects_non_storage() -> None:
    with pytest.raises(TypeError, match="is not an instance of CheckpointStorage"):
        CustomCheckpointStorage(object())  # type: ignore[arg-type]
