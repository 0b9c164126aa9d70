"""RocksDB-specific behaviour: incremental uploads, placeholders, ledger, transfer threads,
storage paths, range checks, TTL cleanup scans and option profiles on the live database."""

from __future__ import annotations

import dataclasses
import glob
import os
import threading
from typing import BinaryIO

import pytest

from sparkpoint.checkpoint.handles import (
    FileStateHandle,
    HandleAndLocalPath,
    IncrementalRemoteKeyedStateHandle,
    PlaceholderStreamStateHandle,
    StreamStateHandle,
)
from sparkpoint.checkpoint.mem_streams import MemCheckpointStreamFactory
from sparkpoint.checkpoint.shared_registry import SharedStateRegistry
from sparkpoint.checkpoint.streams import CheckpointedStateScope, CheckpointStreamFactory
from sparkpoint.clock import SYSTEM_CLOCK
from sparkpoint.errors import SparkpointError
from sparkpoint.state.backend import KeyedStateBackendParameters
from sparkpoint.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from sparkpoint.state.key_groups import compute_key_group_range_for_operator_index
from sparkpoint.state.rocksdb import PredefinedOptions, RocksDBKeyedStateBackend
from sparkpoint.state.rocksdb.local_db import key_group_bounds
from sparkpoint.state.ttl import StateTtlConfig
from sparkpoint.state.typeinfo import Types
from sparkpoint.testing import ManualClock

V = ValueStateDescriptor("v", Types.LONG())
BIG = MemCheckpointStreamFactory(max_state_size=1 << 30)


def _backend(root, subtask=0, parallelism=1, **kwargs) -> RocksDBKeyedStateBackend:
    """A backend of ``subtask``; incremental checkpoints unless told otherwise."""
    clock = kwargs.pop("clock", SYSTEM_CLOCK)
    kwargs.setdefault("incremental", True)
    params = KeyedStateBackendParameters(
        "job",
        "op",
        subtask,
        parallelism,
        128,
        compute_key_group_range_for_operator_index(128, parallelism, subtask),
        str(root),
        clock=clock,
    )
    return RocksDBKeyedStateBackend(params, **kwargs)


def _snap(b, checkpoint_id, factory=BIG) -> IncrementalRemoteKeyedStateHandle:
    handle = b.snapshot(checkpoint_id, factory)()
    assert isinstance(handle, IncrementalRemoteKeyedStateHandle)
    return handle


def _write(b, keys, base=0) -> None:
    state = b.get_partitioned_state(V)
    for k in keys:
        b.set_current_key(k)
        state.update(k + base)


def _sst_parts(handle: IncrementalRemoteKeyedStateHandle):
    uploaded = {
        p.local_path: p.handle
        for p in handle.shared_state
        if not isinstance(p.handle, PlaceholderStreamStateHandle)
    }
    placeholders = {
        p.local_path: p.handle
        for p in handle.shared_state
        if isinstance(p.handle, PlaceholderStreamStateHandle)
    }
    return uploaded, placeholders


def test_incremental_uploads_only_new_ssts_and_references_confirmed_ones(tmp_path) -> None:
    b = _backend(tmp_path)
    _write(b, range(5000))
    b.commit_local(1)
    h1 = _snap(b, 1, BIG)
    up1, ph1 = _sst_parts(h1)
    assert up1 and not ph1
    assert all(name.endswith(".sst") for name in up1)
    assert {p.local_path for p in h1.private_state} >= {"CURRENT"}
    assert any(p.local_path.startswith("MANIFEST") for p in h1.private_state)
    assert any(p.local_path.startswith("OPTIONS") for p in h1.private_state)
    b.notify_checkpoint_complete(1)
    _write(b, range(10), base=1)  # a small change: one new small SST
    b.commit_local(2)
    h2 = _snap(b, 2, BIG)
    up2, ph2 = _sst_parts(h2)
    assert set(ph2) == set(up1)
    for name, placeholder in ph2.items():
        assert placeholder.shared_key == up1[name].physical_id
    assert len(up2) == 1
    assert h2.checkpointed_size < h1.checkpointed_size / 5
    assert not glob.glob(os.path.join(b.directory, "chk-*"))  # local copies removed


def test_unconfirmed_or_aborted_checkpoints_are_not_referenced(tmp_path) -> None:
    # Each snapshot flushes a file into level 0; the fourth would start a compaction that
    # may replace the confirmed checkpoint's files before snapshot 4 links them (timing).
    b = _backend(tmp_path, options={"disable_auto_compactions": True})
    _write(b, range(1000))
    b.commit_local(1)
    _snap(b, 1, BIG)  # never confirmed
    b.commit_local(2)
    h2 = _snap(b, 2, BIG)
    assert not _sst_parts(h2)[1]
    b.notify_checkpoint_aborted(2)
    b.commit_local(3)
    assert not _sst_parts(_snap(b, 3, BIG))[1]
    b.notify_checkpoint_complete(3)
    b.commit_local(4)
    assert _sst_parts(_snap(b, 4, BIG))[1]


def test_ledger_survives_new_backend_instances(tmp_path) -> None:
    """A keyed backend is re-created for every Spark task: confirmations must persist."""
    b = _backend(tmp_path)
    _write(b, range(1000))
    b.commit_local(1)
    h1 = _snap(b, 1, BIG)
    b.close()
    b2 = _backend(tmp_path)
    b2.notify_checkpoint_complete(1)
    b2.close()
    b3 = _backend(tmp_path)
    b3.commit_local(2)
    h2 = _snap(b3, 2, BIG)
    assert set(_sst_parts(h2)[1]) == set(_sst_parts(h1)[0])
    assert h2.backend_identifier == h1.backend_identifier


def test_restore_seeds_the_ledger_with_the_restored_files(tmp_path) -> None:
    registry = SharedStateRegistry()
    b = _backend(tmp_path / "a")
    _write(b, range(2000))
    b.commit_local(1)
    h1 = _snap(b, 1, BIG).register_shared_states(registry, 1)
    r = _backend(tmp_path / "b")
    r.restore([h1])
    r.commit_local(5)
    h2 = _snap(r, 2, BIG)
    assert set(_sst_parts(h2)[1]) == set(_sst_parts(h1)[0])
    resolved = h2.register_shared_states(registry, 2)
    again = _backend(tmp_path / "c")
    again.restore([resolved])
    again.set_current_key(1999)
    assert again.get_partitioned_state(V).value() == 1999


class _TransferProbe:
    """Records which threads transfer files and whether two transfers ever overlapped.

    With ``await_overlap``, the first transfer waits (up to a generous timeout) until a second
    one starts: a pool of several threads always gets there, however slowly its threads start
    on a loaded machine, while transfers done one after another never do.
    """

    def __init__(self, await_overlap: bool) -> None:
        self.threads: set[int] = set()
        self.overlapped = threading.Event()
        self._await = await_overlap
        self._lock = threading.Lock()
        self._running = 0

    def enter(self) -> None:
        with self._lock:
            self.threads.add(threading.get_ident())
            self._running += 1
            if self._running >= 2:
                self.overlapped.set()
        if self._await:
            self._await = self.overlapped.wait(60)  # wait once: a miss is the test's failure

    def leave(self) -> None:
        with self._lock:
            self._running -= 1

    def __reduce__(self):  # the SST ledger pickles restored handles: a copy is inert
        return _TransferProbe, (False,)


class _ProbedFactory(CheckpointStreamFactory):
    def __init__(self, probe: _TransferProbe) -> None:
        self.inner = MemCheckpointStreamFactory(max_state_size=1 << 30)
        self.probe = probe

    def create_checkpoint_state_output_stream(self, scope=CheckpointedStateScope.EXCLUSIVE):
        self.probe.enter()
        try:
            return self.inner.create_checkpoint_state_output_stream(scope)
        finally:
            self.probe.leave()


@dataclasses.dataclass(frozen=True)
class _ProbedHandle(StreamStateHandle):
    inner: StreamStateHandle
    probe: _TransferProbe = dataclasses.field(compare=False, hash=False)

    @property
    def state_size(self) -> int:
        return self.inner.state_size

    def discard(self) -> None:
        self.inner.discard()

    def open_input_stream(self) -> BinaryIO:
        self.probe.enter()
        try:
            return self.inner.open_input_stream()
        finally:
            self.probe.leave()


def _many_ssts(b) -> None:
    for epoch in range(1, 7):  # each checkpoint flush adds an SST
        _write(b, range(epoch * 100, epoch * 100 + 100))
        b.commit_local(epoch)
        b.local_db.db.flush()


@pytest.mark.parametrize("threads", [1, 4])
def test_transfer_threads_for_uploads_and_downloads(tmp_path, threads) -> None:
    b = _backend(
        tmp_path / "src",
        transfer_threads=threads,
        options={"state.backend.rocksdb.compaction.style": "FIFO"},
    )
    _many_ssts(b)
    uploads = _TransferProbe(await_overlap=threads > 1)
    handle = _snap(b, 1, _ProbedFactory(uploads))
    assert len(handle.shared_state) + len(handle.private_state) >= 4  # files to spread
    downloads = _TransferProbe(await_overlap=threads > 1)
    wrapped = dataclasses.replace(
        handle,
        shared_state=tuple(
            HandleAndLocalPath(_ProbedHandle(p.handle, downloads), p.local_path)
            for p in handle.shared_state
        ),
        private_state=tuple(
            HandleAndLocalPath(_ProbedHandle(p.handle, downloads), p.local_path)
            for p in handle.private_state
        ),
    )
    r = _backend(tmp_path / "dst", transfer_threads=threads)
    r.restore([wrapped])
    assert sorted(r.get_keys("v")) == list(range(100, 700))
    for probe in (uploads, downloads):
        if threads == 1:  # everything on the task's own thread, one file at a time
            assert probe.threads == {threading.get_ident()}
            assert not probe.overlapped.is_set()
        else:  # files moved by several pool threads at the same time
            assert probe.overlapped.is_set()
            assert len(probe.threads - {threading.get_ident()}) >= 2


def test_db_storage_paths_choose_a_stable_directory(tmp_path) -> None:
    paths = [str(tmp_path / "d1"), str(tmp_path / "d2"), str(tmp_path / "d3")]
    dirs = {}
    for subtask in range(6):
        b = _backend(tmp_path / "unused", subtask, 6, db_storage_paths=paths)
        dirs[subtask] = b.directory
        assert any(b.directory.startswith(p + os.sep) for p in paths)
        assert os.path.isdir(os.path.join(b.directory, "db"))
        b.close()
    again = _backend(tmp_path / "unused", 2, 6, db_storage_paths=paths)
    assert again.directory == dirs[2]
    again.close()
    assert len(set(dirs.values())) == 6
    assert not os.path.exists(tmp_path / "unused" / "job_job")


def test_local_state_of_another_range_is_wiped(tmp_path) -> None:
    b = _backend(tmp_path, 0, 1)
    _write(b, range(100))
    b.commit_local(3)
    b.close()
    other = _backend(tmp_path, 0, 2)  # same directory, now half the key groups
    assert other.local_epoch() is None
    assert list(other.get_keys("v")) == []
    other.close()


def test_snapshot_with_uncommitted_changes_is_refused(tmp_path) -> None:
    b = _backend(tmp_path)
    _write(b, [1])
    with pytest.raises(SparkpointError, match="commit_local"):
        b.snapshot(1, BIG)


def _raw_count(b) -> int:
    lower, upper = key_group_bounds(0, 127)
    return sum(1 for _ in b.local_db.scan(lower, upper))


@pytest.mark.parametrize("filter_enabled", [True, False])
def test_ttl_cleanup_scan_replaces_the_compaction_filter(tmp_path, filter_enabled) -> None:
    clock = ManualClock(10_000)
    b = _backend(tmp_path, clock=clock, ttl_compaction_filter=filter_enabled)
    cfg = StateTtlConfig.new_builder(1000).cleanup_in_rocksdb_compact_filter(1000).build()
    vd = ValueStateDescriptor("tv", Types.INT())
    vd.enable_time_to_live(cfg)
    ld = ListStateDescriptor("tl", Types.INT())
    ld.enable_time_to_live(cfg)
    md = MapStateDescriptor("tm", Types.INT(), Types.INT())
    md.enable_time_to_live(cfg)
    v, lst, m = (b.get_partitioned_state(d) for d in (vd, ld, md))
    for key in range(10):
        b.set_current_key(key)
        v.update(key)
        lst.add(key)
        m.put(key, key)
    clock.ms += 600
    for key in range(5):
        b.set_current_key(key)
        v.update(key)
        lst.add(key + 100)
        m.put(key + 100, key)
    b.commit_local(1)
    clock.ms += 500  # the first writes expired
    assert _raw_count(b) == 10 + 10 + 15
    removed = b.cleanup_expired_state()
    if filter_enabled:
        assert removed == 5 + 10 + 10  # 5 values, 5 lists dropped + 5 lists shortened, 10 map
        assert _raw_count(b) == 5 + 5 + 5
    else:
        assert removed == 0
        assert _raw_count(b) == 35
    for key in range(10):  # never returned either way
        b.set_current_key(key)
        assert v.value() == (key if key < 5 else None)
        assert list(lst.get()) == ([key + 100] if key < 5 else [])
        assert dict(m.items()) == ({key + 100: key} if key < 5 else {})


def test_restore_maps_state_ids_by_name(tmp_path) -> None:
    """Two subtasks registered their states in different orders (different ids)."""
    a = _backend(tmp_path / "a", 0, 2)
    c = _backend(tmp_path / "c", 1, 2)
    la = ListStateDescriptor("l", Types.INT())
    for b, order in ((a, (V, la)), (c, (la, V))):
        for d in order:
            b.get_partitioned_state(d)
    assert a.registered_states() != c.registered_states()
    from sparkpoint.state.key_groups import assign_to_key_group

    for b in (a, c):
        for key in range(300):
            if b.key_group_range.contains(assign_to_key_group(key, 128)):
                b.set_current_key(key)
                b.get_partitioned_state(V).update(key)
                b.get_partitioned_state(la).add_all([key, -key])
        b.commit_local(1)
    handles = [_snap(a, 1, BIG), _snap(c, 1, BIG)]
    r = _backend(tmp_path / "r")
    r.restore(handles)
    for key in range(300):
        r.set_current_key(key)
        assert r.get_partitioned_state(V).value() == key
        assert list(r.get_partitioned_state(la).get()) == [key, -key]


def test_profile_is_applied_to_the_backend_database(tmp_path) -> None:
    b = _backend(
        tmp_path,
        predefined_options=PredefinedOptions.SPINNING_DISK_OPTIMIZED_HIGH_MEM,
        options={"state.backend.rocksdb.writebuffer.size": "32mb"},
    )
    _write(b, range(10))
    b.commit_local(1)
    b.close()
    latest = max(glob.glob(os.path.join(b.directory, "db", "OPTIONS-*")), key=os.path.getmtime)
    text = open(latest).read()
    assert "target_file_size_base=268435456" in text
    assert "write_buffer_size=33554432" in text
    assert "block_size=131072" in text
    assert "max_open_files=-1" in text


def test_bad_configuration_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="transfer_threads"):
        _backend(tmp_path, transfer_threads=0)
    with pytest.raises(ValueError, match="Unknown RocksDB option"):
        _backend(tmp_path, options={"state.backend.rocksdb.bogus": 1})
    with pytest.raises(ValueError, match="Unknown PredefinedOptions"):
        _backend(tmp_path, predefined_options=7)


def test_file_handles_upload_one_file_per_sst(tmp_path) -> None:
    from sparkpoint.checkpoint.fs_storage import FsCheckpointStorageAccess

    access = FsCheckpointStorageAccess(str(tmp_path / "chk"), None, "a" * 32, file_size_threshold=0)
    access.initialize_base_locations_for_checkpoint()
    b = _backend(tmp_path / "local")
    _many_ssts(b)
    handle = _snap(b, 1, access.initialize_location_for_checkpoint(1))
    shared_dir = os.path.realpath(access.shared_state_directory)
    shared_paths = []
    for part in handle.shared_state:
        assert isinstance(part.handle, FileStateHandle)
        assert os.path.dirname(os.path.realpath(part.handle.path)) == shared_dir
        assert part.handle.size == os.path.getsize(part.handle.path)
        shared_paths.append(part.handle.path)
    assert len(set(shared_paths)) == len(handle.shared_state) > 1
    private_files = [
        p.handle for p in handle.private_state if isinstance(p.handle, FileStateHandle)
    ]
    assert any(p.local_path.startswith("MANIFEST") for p in handle.private_state)
    assert private_files
    assert all(not os.path.realpath(h.path).startswith(shared_dir) for h in private_files)


def test_snapshot_runs_the_cleanup_scan_at_most_once_per_ttl(tmp_path) -> None:
    clock = ManualClock(10_000)
    b = _backend(tmp_path, clock=clock)
    vd = ValueStateDescriptor("tv", Types.INT())
    vd.enable_time_to_live(StateTtlConfig.new_builder(1000).build())  # default: in background
    state = b.get_partitioned_state(vd)

    def write(keys) -> None:
        for key in keys:
            b.set_current_key(key)
            state.update(key)

    write(range(10))
    b.commit_local(1)
    _snap(b, 1)  # first scan: nothing expired yet
    assert _raw_count(b) == 10
    clock.ms += 1000
    write(range(10, 20))
    b.commit_local(2)
    _snap(b, 2)  # 1000 ms since the last scan: keys 0..9 expired and removed
    assert _raw_count(b) == 10
    clock.ms += 999
    _snap(b, 3)  # keys 10..19 expired, but the last scan was 999 ms ago: no scan
    assert _raw_count(b) == 10
    clock.ms += 1
    _snap(b, 4)
    assert _raw_count(b) == 0


def test_embedded_rocksdb_state_backend_creates_this_backend(tmp_path) -> None:
    from sparkpoint.datastream.state_backend import EmbeddedRocksDBStateBackend

    config = EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=False)
    config.set_db_storage_paths(str(tmp_path / "p1"))
    config.set_predefined_options(PredefinedOptions.FLASH_SSD_OPTIMIZED)
    config.set_options({"state.backend.rocksdb.files.open": 321})
    config.set_number_of_transfer_threads(3)
    config.disable_ttl_compaction_filter()
    params = KeyedStateBackendParameters(
        "job",
        "op",
        0,
        1,
        128,
        compute_key_group_range_for_operator_index(128, 1, 0),
        str(tmp_path / "local"),
    )
    b = config.create_keyed_state_backend(params)
    assert isinstance(b, RocksDBKeyedStateBackend)
    assert b.incremental is False
    assert b.transfer_threads == 3
    assert b.ttl_compaction_filter is False
    assert b.directory.startswith(str(tmp_path / "p1"))
    _write(b, range(3))
    b.commit_local(1)
    b.close()
    latest = max(glob.glob(os.path.join(b.directory, "db", "OPTIONS-*")), key=os.path.getmtime)
    assert "max_open_files=321" in open(latest).read()


def test_a_recreated_database_never_reuses_the_old_ledger(tmp_path) -> None:
    """SST names restart in a new database: placeholders for old names would be wrong."""
    b = _backend(tmp_path)
    _write(b, range(500))
    b.commit_local(1)
    h1 = _snap(b, 1)
    b.notify_checkpoint_complete(1)
    b.close()
    for name in glob.glob(os.path.join(b.directory, "db", "MANIFEST-*")):
        with open(name, "wb") as f:
            f.write(b"garbage")
    again = _backend(tmp_path)
    assert again.local_epoch() is None  # the runtime restores from the checkpoint
    assert again.ledger.backend_identifier != h1.backend_identifier
    _write(again, range(500), base=7)
    again.commit_local(1)
    h2 = _snap(again, 2)
    assert not _sst_parts(h2)[1]


class _FailingFactory(CheckpointStreamFactory):
    """Delegates to a real filesystem factory; the n-th stream creation fails."""

    def __init__(self, inner: CheckpointStreamFactory, fail_at: int) -> None:
        self.inner = inner
        self.fail_at = fail_at
        self.count = 0
        self.lock = threading.Lock()

    def create_checkpoint_state_output_stream(self, scope=CheckpointedStateScope.EXCLUSIVE):
        with self.lock:
            self.count += 1
            if self.count == self.fail_at:
                raise OSError("storage unavailable")
        return self.inner.create_checkpoint_state_output_stream(scope)


@pytest.mark.parametrize("threads", [1, 3])
def test_failed_upload_leaves_no_shared_file(tmp_path, threads) -> None:
    from sparkpoint.checkpoint.fs_storage import FsCheckpointStorageAccess

    access = FsCheckpointStorageAccess(str(tmp_path / "chk"), None, "b" * 32, file_size_threshold=0)
    access.initialize_base_locations_for_checkpoint()
    b = _backend(
        tmp_path / "local",
        transfer_threads=threads,
        options={"state.backend.rocksdb.compaction.style": "FIFO"},
    )
    _many_ssts(b)
    factory = _FailingFactory(access.initialize_location_for_checkpoint(1), fail_at=4)
    with pytest.raises(OSError, match="storage unavailable"):
        b.snapshot(1, factory)()
    assert os.listdir(access.shared_state_directory) == []
    assert not glob.glob(os.path.join(b.directory, "chk-*"))
    b.notify_checkpoint_aborted(1)
    handle = _snap(b, 2, access.initialize_location_for_checkpoint(2))
    assert len(os.listdir(access.shared_state_directory)) == len(handle.shared_state)


class _FailingMetaStream:
    """A checkpoint stream that fails when it is handed an incremental meta stream."""

    def __init__(self, inner, magic: bytes) -> None:
        self.inner, self.magic = inner, magic

    def write(self, data):
        if bytes(data[: len(self.magic)]) == self.magic:
            raise OSError("storage went away")
        return self.inner.write(data)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_failed_meta_stream_leaves_no_file_in_shared(tmp_path) -> None:
    """Every file is uploaded, then writing the meta stream fails (as when the checkpoint
    was aborted meanwhile): nothing the upload wrote stays in ``shared/``."""
    from sparkpoint.checkpoint.fs_storage import FsCheckpointStorageAccess
    from sparkpoint.checkpoint.key_group_range import KeyGroupRange
    from sparkpoint.state.rocksdb.incremental import IncrementalMeta

    magic = IncrementalMeta(128, KeyGroupRange(0, 0), {}).to_bytes().split(b"{")[0]
    access = FsCheckpointStorageAccess(str(tmp_path / "chk"), None, "a" * 32, file_size_threshold=0)
    access.initialize_base_locations_for_checkpoint()
    location = access.initialize_location_for_checkpoint(1)

    class Factory(CheckpointStreamFactory):
        def create_checkpoint_state_output_stream(self, scope=CheckpointedStateScope.EXCLUSIVE):
            return _FailingMetaStream(location.create_checkpoint_state_output_stream(scope), magic)

    b = _backend(tmp_path / "local")
    _many_ssts(b)
    with pytest.raises(OSError, match="storage went away"):
        b.snapshot(1, Factory())()
    assert os.listdir(access.shared_state_directory) == []
    assert os.listdir(os.path.join(access.checkpoints_directory, "chk-1")) == []


def test_prefetch_of_a_batch_with_repeated_and_equal_keys_reads_each_entry(tmp_path) -> None:
    """A batch repeats keys, and 1 == True has two entries: after a prefetch of the batch,
    every record reads its own key's committed value."""
    b = _backend(tmp_path)
    state = b.get_partitioned_state(V)
    for key, value in [(k, 100 + k) for k in range(50)] + [(True, 7), (1.0, 8)]:
        b.set_current_key(key)
        state.update(value)
    b.commit_local(1)
    expected = {k: 100 + k for k in range(50)}
    for batch in ([k % 50 for k in range(400)], [1, True, 1.0, 3, 1, True, 1.0, 3]):
        b.prefetch(batch, [b.key_group_of(k) for k in batch])
        got = []
        for key in batch:
            b.set_current_key(key)
            got.append(state.value())
        want = [7 if k is True else 8 if type(k) is float else expected[k] for k in batch]
        assert got == want
