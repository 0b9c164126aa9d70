"""A ``_metadata`` is input from outside: state paths that escape the snapshot's directories
are refused, naming the file and the path, and nothing outside is read or deleted.

Snapshots are real (incremental RocksDB checkpoints and a canonical savepoint, written by
``scripts/retention_soak.KeyedJob``); their ``_metadata`` is then rewritten with the real
serializer after one path was altered. Every escape is tried in every claim mode on local
disk and on moto's S3 server, through the restore, the job's cleanup and the CLI, with
every file access recorded (``tests/fixtures/recording_fs.py``).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scripts.retention_soak import KeyedJob
from sparkpoint.checkpoint.discovery import find_snapshot_dirs
from sparkpoint.checkpoint.handles import (
    FileStateHandle,
    HandleAndLocalPath,
    IncrementalRemoteKeyedStateHandle,
    KeyedStateHandle,
    KeyGroupsSavepointStateHandle,
    RelativeFileStateHandle,
)
from sparkpoint.checkpoint.metadata import CheckpointMetadata
from sparkpoint.checkpoint.metadata.file_format import load_checkpoint, store_checkpoint_metadata
from sparkpoint.checkpoint.paths import SnapshotPaths, comparable_path, snapshot_directories
from sparkpoint.cli.main import main
from sparkpoint.errors import UnsafeStatePathError
from sparkpoint.fs import get_filesystem
from sparkpoint.state.savepoint_format import read_savepoint_state
from tests.fixtures.recording_fs import under

CLAIM_MODES = ["CLAIM", "NO_CLAIM", "LEGACY"]
SECRET = b"not for checkpoints"


# ---- the checked resolution on its own -----------------------------------------------


@pytest.mark.parametrize(
    ("exclusive_dir", "expected"),
    [
        ("/c/job/chk-7", ("/c/job/chk-7", "/c/job/shared", "/c/job/taskowned")),
        (
            "s3://b/c/job/chk-12/",
            ("s3://b/c/job/chk-12", "s3://b/c/job/shared", "s3://b/c/job/taskowned"),
        ),
        ("/sp/savepoint-abc123-0123456789ab", ("/sp/savepoint-abc123-0123456789ab",)),
        ("/c/job/chk-x", ("/c/job/chk-x",)),
    ],
)
def test_the_directories_of_a_snapshot(exclusive_dir: str, expected: tuple[str, ...]) -> None:
    assert snapshot_directories(exclusive_dir) == expected


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("s3://b/c/job/chk-7/f", None),
        ("s3a://b/c/job/shared/x.sst", None),
        ("s3://b/c/job/taskowned/t", None),
        ("s3://b/c/job/chk-8/f", "lies outside the snapshot's directories"),
        ("s3://b/c/job/chk-7", "lies outside"),
        ("s3://b/c/other/shared/x", "lies outside"),
        ("s3://b/c/job/chk-7/../../x", "has a '..' segment"),
        ("s3://b/c/job/chk-7/./f", "has a '.' segment"),
        ("s3://b/c/job/chk-7//f", "has an empty segment"),
        ("s3://other/c/job/chk-7/f", "is on another file system (s3://other)"),
        ("gs://b/c/job/chk-7/f", "is on another file system (gs://b)"),
        ("/c/job/chk-7/f", "is on another file system (file://)"),
        ("s3://b/c/job/chk-7/f\x00", "contains a NUL character"),
    ],
)
def test_absolute_paths(path: str, reason: str | None) -> None:
    paths = SnapshotPaths("s3://b/c/job/chk-7", "s3://b/c/job/chk-7/_metadata")
    if reason is None:
        assert paths.check_absolute(path) == path
        return
    with pytest.raises(UnsafeStatePathError) as info:
        paths.check_absolute(path)
    message = str(info.value)
    assert reason in message
    assert repr(path) in message
    assert "s3://b/c/job/chk-7/_metadata" in message
    assert "s3://b/c/job/chk-7, s3://b/c/job/shared, s3://b/c/job/taskowned" in message


@pytest.mark.parametrize(
    ("relative", "reason"),
    [
        ("f", None),
        ("sub/f", None),
        ("../f", "escapes its directory with a '..' segment"),
        ("sub/../../f", "escapes its directory"),
        ("/etc/passwd", "is absolute where a relative path is expected"),
        ("s3://b/x", "is absolute where a relative path is expected"),
        ("file:/etc/passwd", "is absolute where a relative path is expected"),
        ("", "has an empty segment"),
        ("./f", "has a '.' segment"),
    ],
)
def test_relative_paths(relative: str, reason: str | None, tmp_path: Path) -> None:
    savepoint = tmp_path / "savepoint-abc123-0123456789ab"
    paths = SnapshotPaths(str(savepoint), str(savepoint / "_metadata"))
    if reason is None:
        assert paths.resolve_relative(relative) == f"{savepoint}/{relative}"
        return
    with pytest.raises(UnsafeStatePathError, match=reason):
        paths.resolve_relative(relative)


@pytest.mark.parametrize(
    "name", ["000012.sst", "MANIFEST-000005", "CURRENT", "OPTIONS-000007", "rocksdict-config.json"]
)
def test_rocksdb_file_names(name: str) -> None:
    assert SnapshotPaths("/c/job/chk-1").check_local_name(name) == name


@pytest.mark.parametrize("name", ["../x.sst", "a/b", "..", ".", "", "/x", ".hidden"])
def test_rocksdb_file_names_that_are_not_plain(name: str) -> None:
    with pytest.raises(UnsafeStatePathError, match="is not a plain file name"):
        SnapshotPaths("/c/job/chk-1").check_local_name(name)


def test_a_snapshot_at_the_root_of_a_file_system_names_no_file() -> None:
    for directory, path in (("/", "/x"), ("s3://b", "s3://b/x")):
        paths = SnapshotPaths(directory)
        with pytest.raises(UnsafeStatePathError, match="root of its file system"):
            paths.check_absolute(path)
        with pytest.raises(UnsafeStatePathError, match="root of its file system"):
            paths.resolve_relative("x")


def test_symbolic_links_are_followed_on_local_disk(tmp_path: Path) -> None:
    chk = tmp_path / "job" / "chk-3"
    (tmp_path / "job" / "shared").mkdir(parents=True)
    chk.mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "f").write_bytes(SECRET)
    (chk / "inner").write_bytes(b"ok")
    (chk / "to-inner").symlink_to(chk / "inner")
    (chk / "to-outside").symlink_to(outside / "f")
    (chk / "dir-outside").symlink_to(outside)
    paths = SnapshotPaths(str(chk))
    assert paths.check_absolute(str(chk / "to-inner")) == str(chk / "to-inner")
    assert paths.resolve_relative("to-inner") == f"{chk}/to-inner"
    for bad in (str(chk / "to-outside"), str(chk / "dir-outside" / "f")):
        with pytest.raises(UnsafeStatePathError, match="resolves through a symbolic link to"):
            paths.check_absolute(bad)
    with pytest.raises(UnsafeStatePathError, match=str(outside / "f")):
        paths.resolve_relative("to-outside")
    # a snapshot directory that is itself a link is checked by its real location
    moved = tmp_path / "moved"
    (tmp_path / "job").rename(moved)
    (tmp_path / "job").symlink_to(moved)
    assert SnapshotPaths(str(chk)).check_absolute(str(chk / "inner")) == str(chk / "inner")


def test_entropy_is_accepted_only_where_the_key_was() -> None:
    from sparkpoint.fs import configure
    from sparkpoint.fs.registry import get_options

    previous = get_options()
    root = "s3://b/cp/job/chk-2"
    try:
        configure({**previous, "s3.entropy.key": "_entropy_", "s3.entropy.length": "4"})
        paths = SnapshotPaths(root)
        assert paths.check_absolute("s3://b/Ab12/cp/job/chk-2/f")  # the key was a segment
        assert paths.check_absolute("s3://b/cpAb12/job/shared/x.sst")  # within one
        assert paths.check_absolute("s3://b/cp/job/Ab12/chk-2/f")  # just above chk-2
        for bad in (
            "s3://b/Ab1/cp/job/chk-2/f",  # too short
            "s3://b/Ab12/Cd34/cp/job/chk-2/f",  # twice
            "s3://b/A-12/cp/job/chk-2/f",  # not alphanumeric
            "s3://b/cp/job/chk-2Ab12/f",  # inside the snapshot directory's own name
            "s3://b/Ab12/cp/job/chk-3/f",  # another checkpoint
        ):
            with pytest.raises(UnsafeStatePathError, match="lies outside"):
                paths.check_absolute(bad)
        configure(previous)
        with pytest.raises(UnsafeStatePathError, match="lies outside"):
            SnapshotPaths(root).check_absolute("s3://b/Ab12/cp/job/chk-2/f")
    finally:
        configure(previous)


def test_a_savepoint_may_name_files_of_other_snapshots(tmp_path: Path) -> None:
    """The state processor's keep="reference": a savepoint naming the files of the snapshot
    it was made from, which must be a snapshot (a _metadata, or a job's shared/)."""
    new = tmp_path / "new"
    old = tmp_path / "old"
    job = tmp_path / "ckpt" / "job"
    for directory in (new, old, job / "chk-4", job / "shared", tmp_path / "plain"):
        directory.mkdir(parents=True)
    (old / "_metadata").write_bytes(b"x")
    (job / "chk-4" / "_metadata").write_bytes(b"x")
    (tmp_path / "plain" / "f").write_bytes(SECRET)
    (old / "link").symlink_to(tmp_path / "plain" / "f")
    savepoint = SnapshotPaths(str(new), str(new / "_metadata"), savepoint=True)
    for ok in (old / "f", job / "chk-4" / "f", job / "shared" / "x.sst"):
        assert savepoint.check_absolute(str(ok)) == str(ok)
    for bad, reason in (
        (tmp_path / "plain" / "f", "lies outside the snapshot's directories or another"),
        (old / "link", "resolves through a symbolic link"),
    ):
        with pytest.raises(UnsafeStatePathError, match=reason):
            savepoint.check_absolute(str(bad))
    with pytest.raises(UnsafeStatePathError, match="or another snapshot's"):
        SnapshotPaths("s3://b/sp/new", savepoint=True).check_absolute("s3://b/f")  # no I/O
    checkpoint = SnapshotPaths(str(job / "chk-5"))
    with pytest.raises(UnsafeStatePathError, match="lies outside the snapshot's directories;"):
        checkpoint.check_absolute(str(old / "f"))


# ---- crafted _metadata files on real storage --------------------------------------------


@dataclass
class Snapshots:
    """A job's retained incremental checkpoint and a savepoint, and a secret outside them."""

    base: str
    checkpoint: str
    savepoint: str
    outside: str  # a directory on the snapshots' file system, outside every snapshot
    local_outside: Path  # a directory on local disk, outside every snapshot
    job: KeyedJob

    @property
    def secrets(self) -> list[str]:
        return [f"{self.outside}/secret", str(self.local_outside / "secret")]


def _make_snapshots(storage_base: str, tmp_path: Path) -> Snapshots:
    job = KeyedJob(
        f"{storage_base}/ckpt", str(tmp_path / "local-a"), parallelism=1, inline_threshold=0
    )
    for epoch in range(3):
        job.run_epoch({k: k * 10 + epoch for k in range(epoch * 50, epoch * 50 + 400)})
        job.checkpoint()
    savepoint = job.savepoint(f"{storage_base}/sp")
    checkpoint = job.store.get_latest_checkpoint().external_pointer  # type: ignore[union-attr]
    job.close()
    outside = f"{storage_base}/outside"
    get_filesystem(outside).mkdirs(outside)
    get_filesystem(outside).write_atomic(f"{outside}/secret", SECRET)
    local_outside = tmp_path / "outside-local"
    local_outside.mkdir()
    (local_outside / "secret").write_bytes(SECRET)
    return Snapshots(storage_base, checkpoint, savepoint, outside, local_outside, job)


@pytest.fixture(scope="module", params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def module_snapshots(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Snapshots:
    """Snapshots on local disk and on moto's S3, made once per module (they cost ~0.5 s)."""
    tmp_path = tmp_path_factory.mktemp("snapshots")
    if request.param == "local":
        return _make_snapshots(tmp_path.as_uri(), tmp_path)
    from tests.fixtures.s3 import ensure_s3_configured

    server = request.getfixturevalue("s3_server")
    ensure_s3_configured(server)
    return _make_snapshots(server.unique_prefix(), tmp_path)


@pytest.fixture
def snapshots(module_snapshots: Snapshots) -> Iterator[Snapshots]:
    """The module's snapshots, their ``_metadata`` files put back after each test."""
    originals = {}
    for pointer in (module_snapshots.checkpoint, module_snapshots.savepoint):
        path = f"{pointer}/_metadata"
        originals[path] = get_filesystem(path).read_bytes(path)
    yield module_snapshots
    for path, data in originals.items():
        get_filesystem(path).write_atomic(path, data, overwrite=True)


@pytest.fixture
def local_snapshots(tmp_path: Path) -> Snapshots:
    """Snapshots on local disk, where symbolic links exist."""
    return _make_snapshots(tmp_path.as_uri(), tmp_path)


def _map_keyed(
    metadata: CheckpointMetadata, fn: Callable[[KeyedStateHandle], KeyedStateHandle]
) -> CheckpointMetadata:
    ops = tuple(
        dataclasses.replace(
            op,
            subtask_states={
                i: dataclasses.replace(s, managed_keyed_state=tuple(map(fn, s.managed_keyed_state)))
                for i, s in op.subtask_states.items()
            },
        )
        for op in metadata.operator_states
    )
    return dataclasses.replace(metadata, operator_states=ops)


def _first_shared_file(
    path: str | None = None, local_name: str | None = None
) -> Callable[[KeyedStateHandle], KeyedStateHandle]:
    def alter(handle: KeyedStateHandle) -> KeyedStateHandle:
        assert isinstance(handle, IncrementalRemoteKeyedStateHandle)
        first = handle.shared_state[0]
        assert isinstance(first.handle, FileStateHandle)
        changed = HandleAndLocalPath(
            FileStateHandle(path, first.handle.size) if path else first.handle,
            local_name or first.local_path,
        )
        return dataclasses.replace(handle, shared_state=(changed, *handle.shared_state[1:]))

    return alter


def _relative_file(relative: str) -> Callable[[KeyedStateHandle], KeyedStateHandle]:
    def alter(handle: KeyedStateHandle) -> KeyedStateHandle:
        assert isinstance(handle, KeyGroupsSavepointStateHandle)
        delegate = handle.delegate
        assert isinstance(delegate, RelativeFileStateHandle)
        moved = RelativeFileStateHandle("unused", delegate.size, relative)
        return dataclasses.replace(handle, delegate=moved)

    return alter


def _savepoint_file(path: str) -> Callable[[KeyedStateHandle], KeyedStateHandle]:
    def alter(handle: KeyedStateHandle) -> KeyedStateHandle:
        assert isinstance(handle, KeyGroupsSavepointStateHandle)
        return dataclasses.replace(handle, delegate=FileStateHandle(path, 10))

    return alter


def _craft(
    snapshots: Snapshots, pointer: str, alter: Callable[[KeyedStateHandle], KeyedStateHandle]
) -> str:
    """Rewrite ``pointer``'s ``_metadata`` (real serializer) with one path altered."""
    metadata, _ = load_checkpoint(snapshots.job.storage, pointer)
    path = f"{pointer}/_metadata"
    data = store_checkpoint_metadata(_map_keyed(metadata, alter))
    get_filesystem(path).write_atomic(path, data, overwrite=True)
    return path


def _link(snapshots: Snapshots, at: str, target: Path) -> str:
    """A symbolic link at ``at`` (a local path or file URI) to ``target``."""
    link = Path(comparable_path(at))
    link.symlink_to(target)
    return at


def _escape(snapshots: Snapshots, name: str) -> tuple[str, str, str]:
    """Craft the escape ``name``; returns (pointer, _metadata path, offending path)."""
    s3 = snapshots.base.startswith("s3://")
    chk, sp = snapshots.checkpoint, snapshots.savepoint
    job_dir = chk.rsplit("/", 1)[0]
    local_secret = str(snapshots.local_outside / "secret")
    other_fs = f"file://{local_secret}" if s3 else "s3://sparkpoint-test/outside/secret"
    other_host = "s3://another-bucket/outside/secret" if s3 else f"file://otherhost{local_secret}"
    checkpoint_escapes = {
        "absolute outside": f"{snapshots.outside}/secret",
        "absolute with ..": f"{chk}/../../../outside/secret",
        "another file system": other_fs,
        "another bucket or host": other_host,
    }
    if name in checkpoint_escapes:
        bad = checkpoint_escapes[name]
        return chk, _craft(snapshots, chk, _first_shared_file(path=bad)), bad
    if name == "RocksDB file name with ..":
        bad = "../../../../escaped.sst"  # from the restore's download directory
        return chk, _craft(snapshots, chk, _first_shared_file(local_name=bad)), bad
    if name == "symbolic link to a file":
        bad = _link(snapshots, f"{job_dir}/shared/link-{uuid.uuid4().hex}", Path(local_secret))
        return chk, _craft(snapshots, chk, _first_shared_file(path=bad)), bad
    if name == "symbolic link to a directory":
        link = _link(snapshots, f"{chk}/link-dir", snapshots.local_outside)
        bad = f"{link}/secret"
        return chk, _craft(snapshots, chk, _first_shared_file(path=bad)), bad
    if name == "savepoint naming a file outside":
        bad = f"{snapshots.outside}/secret"
        return sp, _craft(snapshots, sp, _savepoint_file(bad)), bad
    relative_escapes = {
        "relative with ..": "../../outside/secret",
        "absolute where relative": (f"{snapshots.outside}/secret" if s3 else local_secret),
    }
    if name in relative_escapes:
        bad = relative_escapes[name]
        return sp, _craft(snapshots, sp, _relative_file(bad)), bad
    assert name == "relative symbolic link"
    _link(snapshots, f"{sp}/link-file", Path(local_secret))
    return sp, _craft(snapshots, sp, _relative_file("link-file")), "link-file"


ESCAPES = [
    "absolute outside",
    "absolute with ..",
    "another file system",
    "another bucket or host",
    "RocksDB file name with ..",
    "relative with ..",
    "absolute where relative",
    "savepoint naming a file outside",
]
LOCAL_ESCAPES = [
    "symbolic link to a file",
    "symbolic link to a directory",
    "relative symbolic link",
]


@pytest.mark.parametrize("claim_mode", CLAIM_MODES)
@pytest.mark.parametrize("escape", ESCAPES)
def test_escaping_state_path_is_refused_and_nothing_outside_is_touched(
    snapshots: Snapshots,
    escape: str,
    claim_mode: str,
    tmp_path: Path,
    recorded_access: list[tuple[str, str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    _refused_and_untouched(snapshots, escape, claim_mode, tmp_path, recorded_access, capsys)


@pytest.mark.parametrize("claim_mode", CLAIM_MODES)
@pytest.mark.parametrize("escape", LOCAL_ESCAPES)
def test_symbolic_link_escape_is_refused_and_nothing_outside_is_touched(
    local_snapshots: Snapshots,
    escape: str,
    claim_mode: str,
    tmp_path: Path,
    recorded_access: list[tuple[str, str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    _refused_and_untouched(local_snapshots, escape, claim_mode, tmp_path, recorded_access, capsys)


def _refused_and_untouched(
    snapshots: Snapshots,
    escape: str,
    claim_mode: str,
    tmp_path: Path,
    recorded_access: list[tuple[str, str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    pointer, metadata_file, bad = _escape(snapshots, escape)
    recorded_access.clear()

    # restore in the claim mode, then the job's cleanup (it failed)
    job = KeyedJob(f"{snapshots.base}/ckpt-b", str(tmp_path / "local-b"), parallelism=1)
    with pytest.raises(UnsafeStatePathError) as info:
        job.restore(pointer, claim_mode)
    message = str(info.value)
    assert metadata_file in message
    assert repr(bad) in message
    assert job.store.shutdown("FAILED", job.cleaner) == []
    job.close()

    # the CLI and the savepoint reader refuse it the same way
    assert main(["checkpoints", "inspect", pointer]) == 2
    assert repr(bad) in capsys.readouterr().err
    assert main(["savepoint", "dump", pointer, "-o", str(tmp_path / "dump")]) == 2
    assert repr(bad) in capsys.readouterr().err
    with pytest.raises(UnsafeStatePathError):
        read_savepoint_state(pointer)
    listed = {e.path.rstrip("/"): e for e in find_snapshot_dirs(f"{snapshots.base}/ckpt")}
    if pointer in listed:
        assert listed[pointer].status == "corrupt"
        assert repr(bad) in (listed[pointer].error or "")

    # nothing outside the snapshot was read, listed, written or deleted (a savepoint may
    # name another snapshot's files: whether a directory holds a _metadata is looked at)
    assert recorded_access, "the recorder saw nothing at all"
    for directory in (snapshots.outside, str(snapshots.local_outside)):
        touched = under(recorded_access, directory)
        assert [e for e in touched if e != ("stat", f"{directory}/_metadata")] == []
    touched = [p for _, p in recorded_access if "secret" in p or "link-" in p or "escaped" in p]
    assert touched == []
    assert get_filesystem(snapshots.secrets[0]).read_bytes(snapshots.secrets[0]) == SECRET
    assert Path(snapshots.secrets[1]).read_bytes() == SECRET
    assert list(tmp_path.rglob("escaped.sst")) == []


@pytest.mark.parametrize("claim_mode", CLAIM_MODES)
def test_untouched_snapshot_restores_reading_only_its_own_directories(
    snapshots: Snapshots,
    claim_mode: str,
    tmp_path: Path,
    recorded_access: list[tuple[str, str]],
) -> None:
    """The control for the test above: the recorder sees a restore's reads, all of them in
    the snapshot's directories; the state comes back whole."""
    recorded_access.clear()
    job = KeyedJob(f"{snapshots.base}/ckpt-b", str(tmp_path / "local-b"), parallelism=1)
    job.restore(snapshots.checkpoint, claim_mode)
    assert job.read_all(range(600)) == snapshots.job.expected
    job.close()
    reads = [(op, p) for op, p in recorded_access if op in ("read", "local-read", "local-open")]
    allowed = snapshot_directories(snapshots.checkpoint)
    inside = [e for d in allowed for e in under(reads, d)]
    snapshot_reads = [e for e in reads if "/ckpt/" in e[1]]
    assert len(snapshot_reads) >= 4  # _metadata, meta stream, SSTs, MANIFEST ...
    assert sorted(snapshot_reads) == sorted(inside)
    assert under(recorded_access, snapshots.outside) == []
