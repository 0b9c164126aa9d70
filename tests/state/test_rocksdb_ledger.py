"""The SST upload ledger: persisted, shared by backend instances, safe under concurrency."""

from __future__ import annotations

import threading

from sparkpoint.checkpoint.handles import ByteStreamStateHandle
from sparkpoint.state.rocksdb.ledger import SstUploadLedger


def _h(name: str) -> ByteStreamStateHandle:
    return ByteStreamStateHandle(name, name.encode())


def test_confirmation_by_another_instance_is_seen(tmp_path) -> None:
    path = str(tmp_path / "ledger")
    writer = SstUploadLedger.load(path)
    writer.record(1, {"000001.sst": _h("a")})
    assert writer.confirmed() == {}
    other = SstUploadLedger.load(path)
    assert other.backend_identifier == writer.backend_identifier
    other.complete(1)
    assert writer.confirmed() == {"000001.sst": _h("a")}


def test_complete_forgets_older_lists_and_ignores_stale_ids(tmp_path) -> None:
    ledger = SstUploadLedger.load(str(tmp_path / "ledger"))
    ledger.record(1, {"a.sst": _h("a")})
    ledger.record(2, {"b.sst": _h("b")})
    ledger.record(3, {"c.sst": _h("c")})
    ledger.complete(2)
    assert set(ledger.uploaded) == {2, 3}
    ledger.complete(1)  # older than the last completed: ignored
    assert ledger.last_completed_checkpoint_id == 2
    ledger.abort(3)
    assert set(ledger.uploaded) == {2}


def test_a_replaced_database_makes_old_instances_stale(tmp_path) -> None:
    path = str(tmp_path / "ledger")
    old = SstUploadLedger.load(path)
    old.record(1, {"a.sst": _h("a")})
    new = SstUploadLedger.load(path)
    new.reset()  # the database was restored or wiped
    old.record(2, {"b.sst": _h("b")})  # a late upload of the old database: ignored
    old.complete(1)
    assert SstUploadLedger.load(path).uploaded == {}
    assert old.confirmed() == {}


def test_concurrent_records_are_all_kept(tmp_path) -> None:
    path = str(tmp_path / "ledger")
    SstUploadLedger.load(path).save()
    ledgers = [SstUploadLedger.load(path) for _ in range(8)]

    def work(i: int) -> None:
        for j in range(20):
            ledgers[i].record(i * 100 + j, {"x.sst": _h("x")})

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(SstUploadLedger.load(path).uploaded) == 160
