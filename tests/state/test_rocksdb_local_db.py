"""The local RocksDB layer: read-your-writes, merged scans, epoch commits and one-step undo."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.state.rocksdb.local_db import (
    LocalRocksDB,
    data_prefix,
    key_group_bounds,
    prefix_upper_bound,
)
from sparkpoint.state.rocksdb.options import build_db_options


@pytest.fixture
def db(tmp_path):
    local = LocalRocksDB(str(tmp_path / "db"), lambda: build_db_options(0))
    yield local
    local.close()


def test_layout_helpers() -> None:
    assert data_prefix(3, 1) == b"\x00\x03\x00\x01"
    assert key_group_bounds(2, 5) == (b"\x00\x02", b"\x00\x06")
    assert prefix_upper_bound(b"\x00\x01\xff") == b"\x00\x02"
    assert prefix_upper_bound(b"\xff\xff") is None


def test_reads_see_pending_writes_and_commit_persists(db, tmp_path) -> None:
    p = data_prefix(7, 2)
    db.put(p + b"a", b"1")
    assert db.get(p + b"a") == b"1"
    assert db.db.get(p + b"a") is None  # nothing reached RocksDB before the commit
    db.commit(1, b"extra-1")
    db.close()
    reopened = LocalRocksDB(db.path, lambda: build_db_options(0))
    try:
        assert reopened.get(p + b"a") == b"1"
        assert reopened.local_epoch() == 1
        assert reopened.local_extra() == b"extra-1"
    finally:
        reopened.close()


def test_uncommitted_writes_are_lost_on_close(db) -> None:
    p = data_prefix(0, 1)
    db.put(p + b"x", b"1")
    db.close()
    reopened = LocalRocksDB(db.path, lambda: build_db_options(0))
    try:
        assert reopened.get(p + b"x") is None
        assert reopened.local_epoch() is None
    finally:
        reopened.close()


def test_revert_undoes_the_last_commit_once(db) -> None:
    p = data_prefix(1, 1)
    db.put(p + b"a", b"1")
    db.put(p + b"b", b"2")
    db.commit(4, b"e4")
    db.put(p + b"a", b"10")
    db.delete(p + b"b")
    db.put(p + b"c", b"3")
    db.commit(5, b"e5")
    assert dict(db.scan_prefix(p)) == {p + b"a": b"10", p + b"c": b"3"}
    assert db.revert(4) is True
    assert dict(db.scan_prefix(p)) == {p + b"a": b"1", p + b"b": b"2"}
    assert db.local_epoch() == 4
    assert db.local_extra() == b"e4"
    assert db.revert(4) is True  # already there
    assert db.revert(3) is False  # only one step back is possible
    assert db.local_epoch() == 4


def test_revert_to_unrelated_epoch_is_refused_and_drops_pending(db) -> None:
    p = data_prefix(1, 1)
    db.put(p + b"a", b"1")
    db.commit(1, b"")
    db.put(p + b"a", b"2")
    db.commit(2, b"")
    db.put(p + b"a", b"3")
    assert db.revert(0) is False
    assert db.get(p + b"a") == b"2"
    assert db.local_epoch() == 2


def test_first_commit_cannot_be_reverted_to_an_epoch(db) -> None:
    db.put(data_prefix(0, 1) + b"k", b"v")
    db.commit(1, b"")
    assert db.revert(0) is False
    assert db.local_epoch() == 1


def test_reset_epochs_forgets_marker_and_undo(db) -> None:
    db.commit(1, b"x")
    db.commit(2, b"y")
    db.reset_epochs()
    assert db.local_epoch() is None
    assert db.local_extra() == b""
    assert db.revert(1) is False


def test_checkpoint_is_a_consistent_copy(db, tmp_path) -> None:
    p = data_prefix(2, 1)
    db.put(p + b"k", b"old")
    db.commit(1, b"")
    db.create_checkpoint(str(tmp_path / "chk"))
    db.put(p + b"k", b"new")
    db.commit(2, b"")
    copy = LocalRocksDB(str(tmp_path / "chk"), lambda: build_db_options(0))
    try:
        assert copy.get(p + b"k") == b"old"
        assert copy.local_epoch() == 1
    finally:
        copy.close()


@settings(max_examples=40, deadline=None)
@given(
    committed=st.dictionaries(
        st.binary(min_size=1, max_size=3), st.binary(max_size=3), max_size=20
    ),
    ops=st.lists(
        st.tuples(st.binary(min_size=1, max_size=3), st.one_of(st.none(), st.binary(max_size=3))),
        max_size=30,
    ),
)
def test_scan_merges_pending_with_committed(tmp_path_factory, committed, ops) -> None:
    path = str(tmp_path_factory.mktemp("merge") / "db")
    local = LocalRocksDB(path, lambda: build_db_options(0))
    try:
        p = data_prefix(9, 3)
        model = {}
        for k, v in committed.items():
            local.put(p + k, v)
            model[p + k] = v
        local.commit(1, b"")
        for i, (k, v) in enumerate(ops):
            if v is None:
                local.delete(p + k)
                model.pop(p + k, None)
            else:
                local.put(p + k, v)
                model[p + k] = v
            if i % 7 == 0:  # interleave scans with writes (keeps the pending sort warm)
                assert list(local.scan_prefix(p)) == sorted(model.items())
        assert list(local.scan_prefix(p)) == sorted(model.items())
        lower, upper = key_group_bounds(9, 9)
        assert list(local.scan(lower, upper)) == sorted(model.items())
    finally:
        local.destroy()


def test_undo_of_read_modify_write_uses_the_value_read(db) -> None:
    p = data_prefix(4, 1)
    db.put(p + b"k", b"1")
    db.commit(1, b"")
    assert db.get(p + b"k") == b"1"  # read, then write: commit reuses the read value
    db.put(p + b"k", b"2")
    assert db.get(p + b"absent") is None
    db.put(p + b"absent", b"x")
    db.commit(2, b"")
    assert db.revert(1) is True
    assert db.get(p + b"k") == b"1"
    assert db.get(p + b"absent") is None


def test_direct_writes_invalidate_the_remembered_read(db) -> None:
    p = data_prefix(4, 1)
    db.put(p + b"k", b"1")
    db.commit(1, b"")
    assert db.get(p + b"k") == b"1"
    db.write_now([(p + b"k", b"restored")])  # e.g. a restore or a TTL cleanup
    db.put(p + b"k", b"2")
    db.commit(2, b"")
    assert db.revert(1) is True
    assert db.get(p + b"k") == b"restored"


def test_corrupt_local_database_starts_empty(tmp_path) -> None:
    path = str(tmp_path / "db")
    local = LocalRocksDB(path, lambda: build_db_options(0))
    local.put(data_prefix(0, 1) + b"k", b"v")
    local.commit(3, b"")
    local.close()
    import glob
    import os

    for name in glob.glob(os.path.join(path, "MANIFEST-*")):
        with open(name, "wb") as f:
            f.write(b"garbage")
    reopened = LocalRocksDB(path, lambda: build_db_options(0))
    try:
        assert reopened.local_epoch() is None
        assert reopened.get(data_prefix(0, 1) + b"k") is None
    finally:
        reopened.close()


def test_second_open_of_a_held_database_is_refused(tmp_path, monkeypatch) -> None:
    from sparkpoint.errors import StateLostError
    from sparkpoint.state.rocksdb import local_db

    monkeypatch.setattr(local_db, "_OPEN_RETRY_SECONDS", 0.3)
    path = str(tmp_path / "db")
    holder = LocalRocksDB(path, lambda: build_db_options(0))
    try:
        with pytest.raises(StateLostError, match="Cannot open the local RocksDB"):
            LocalRocksDB(path, lambda: build_db_options(0))
    finally:
        holder.close()


def test_bulk_load_ingests_sorted_files_and_later_writes_win(tmp_path, monkeypatch) -> None:
    from sparkpoint.state.rocksdb import bulk_load

    monkeypatch.setattr(bulk_load, "_FLUSH_BYTES", 64)  # force several files
    local = LocalRocksDB(str(tmp_path / "db"), lambda: build_db_options(0))
    try:
        expected: dict[bytes, bytes] = {}
        with local.bulk_load(str(tmp_path / "bulk")):
            for kg in (5, 2, 9):  # not in key order: files overlap in range, not in keys
                items = [(data_prefix(kg, 1) + bytes([i]), b"v%d" % i) for i in (3, 1, 2)]
                local.write_now(items)
                expected.update(items)
            again = (data_prefix(9, 1) + bytes([1]), b"latest")
            local.write_now([again])
            expected[again[0]] = again[1]
            assert local.db.get(again[0]) is None  # nothing visible before the block ends
        lower, upper = key_group_bounds(0, 127)
        assert list(local.scan(lower, upper)) == sorted(expected.items())
        assert not (tmp_path / "bulk").exists()
    finally:
        local.close()


def test_bulk_load_keeps_key_groups_after_a_flush_within_one_write(tmp_path) -> None:
    """Regression: a flush in the middle of one ``add`` call (several key groups) lost the
    key groups after it (a RocksDB restore of > 64 MiB per subtask lost entries)."""
    import rocksdict

    from sparkpoint.state.rocksdb.bulk_load import BulkLoader

    local = LocalRocksDB(str(tmp_path / "db"), lambda: build_db_options(0))

    def ingest(path: str) -> None:
        local.db.ingest_external_file([path], rocksdict.IngestExternalFileOptions())

    try:
        loader = BulkLoader(
            str(tmp_path / "bulk"), lambda: build_db_options(0), ingest, flush_bytes=64
        )
        items = [(data_prefix(kg, 1) + bytes([i]), b"v" * 20) for kg in range(4) for i in range(5)]
        loader.add(items)
        loader.add([(data_prefix(3, 2) + b"x", b"same group, next call")])
        loader.finish()
        assert loader.files_ingested >= 2
        lower, upper = key_group_bounds(0, 127)
        assert len(list(local.scan(lower, upper))) == len(items) + 1
    finally:
        local.close()


def test_failed_bulk_load_ingests_nothing(tmp_path) -> None:
    local = LocalRocksDB(str(tmp_path / "db"), lambda: build_db_options(0))
    try:
        with pytest.raises(RuntimeError), local.bulk_load(str(tmp_path / "bulk")):
            local.write_now([(data_prefix(1, 1) + b"k", b"v")])
            raise RuntimeError("restore failed")
        assert local.db.get(data_prefix(1, 1) + b"k") is None
        assert not (tmp_path / "bulk").exists()
    finally:
        local.close()


def test_a_commit_writes_no_undo_data_and_reverts_through_its_checkpoint(db) -> None:
    """The undo of a commit is a RocksDB checkpoint of the state it replaced: hard links to
    its SST files, no undo value written and no old value read."""
    p = data_prefix(5, 1)
    for i in range(100):
        db.put(p + bytes([i]), b"v")
    db.commit(1, b"")
    db.db.flush()  # the values of epoch 1 in an SST file
    for i in range(100):
        db.put(p + bytes([i]), b"w")  # old values never read
    db.commit(2, b"")
    assert [k for k in db.db.keys(from_key=b"\xff")] == [b"\xff\x00epoch", b"\xff\x00extra"]
    sst = [f for f in os.listdir(db.undo_path) if f.endswith(".sst")]
    assert sst and all(os.stat(os.path.join(db.undo_path, f)).st_nlink >= 2 for f in sst)
    assert db.revert(1) is True
    assert db.local_epoch() == 1
    assert dict(db.scan_prefix(p)) == {p + bytes([i]): b"v" for i in range(100)}
    assert db.revert(0) is False  # one step back only
    assert not os.path.exists(db.undo_path)


def test_deletes_of_scanned_entries_revert_to_the_scanned_values(db) -> None:
    p = data_prefix(6, 1)
    db.put(p + b"a", b"1")
    db.put(p + b"b", b"2")
    db.commit(1, b"")
    db.put(p + b"c", b"3")  # pending: its undo is a delete
    db.delete_scanned([k for k, _ in db.scan_prefix(p)])
    assert list(db.scan_prefix(p)) == []
    db.commit(2, b"")
    assert db.revert(1) is True
    assert dict(db.scan_prefix(p)) == {p + b"a": b"1", p + b"b": b"2"}


def test_ranges_deleted_whole_commit_as_range_deletions(db) -> None:
    """``delete_ranges``: the epoch's reads see every key deleted; the commit writes a range
    deletion (a key written again after it survives, keys outside it too), and reverting
    brings every key back."""
    p = data_prefix(7, 1)
    for i in range(50):
        db.put(p + bytes([i]), b"v")
    db.commit(1, b"")
    db.db.flush()
    lower, upper = p + bytes([10]), p + bytes([40])
    db.put(p + bytes([20]), b"pending")  # pending in the range: scanned, deleted too
    keys = [k for k, _ in db.scan(lower, upper)]
    assert len(keys) == 30
    db.delete_ranges([(lower, upper, keys)])
    assert list(db.scan(lower, upper)) == []
    assert db.get(p + bytes([15])) is None
    db.put(p + bytes([33]), b"again")  # written again after its range was deleted
    db.commit(2, b"")
    assert dict(db.scan_prefix(p)) == {
        **{p + bytes([i]): b"v" for i in [*range(10), *range(40, 50)]},
        p + bytes([33]): b"again",
    }
    assert db.revert(1) is True
    assert dict(db.scan_prefix(p)) == {p + bytes([i]): b"v" for i in range(50)}


@pytest.mark.parametrize("step", [1, 31])  # dense: one ordered scan; sparse: multi-gets
def test_prefetch_caches_the_committed_values_of_dense_and_sparse_keys(db, step) -> None:
    p = data_prefix(1, 1)
    n = 40_000  # sparse (step 31): ~1,300 keys, two multi-get chunks of 1,000
    for i in range(0, n, 2):  # even keys committed, odd ones absent
        db.put(p + b"%06d" % i, b"v%d" % i)
    db.commit(1, b"")
    wanted = [p + b"%06d" % i for i in range(0, n, step)]
    wanted += [p + b"999999", data_prefix(2, 1) + b"x"]  # past every entry
    db.put(wanted[0], b"pending")
    db.prefetch(reversed(wanted))
    for key in wanted[1:]:  # behind the cache's back: prefetched reads must not see it
        db.db.put(key, b"changed")
    for key in wanted[1:]:
        digits = key[len(p) :]
        i = int(digits) if digits.isdigit() else n
        assert db.get(key) == (b"v%d" % i if i < n and i % 2 == 0 else None), key
    assert db.get(wanted[0]) == b"pending"
