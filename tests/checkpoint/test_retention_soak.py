"""The retention soak (``scripts/retention_soak.py``) in small: 25 incremental RocksDB
checkpoints with retention 3 leave exactly the files the retained ``_metadata`` reference."""

from __future__ import annotations

from pathlib import Path

from scripts.retention_soak import KeyedJob, run_soak
from sparkpoint.checkpoint.audit import audit_checkpoint_directory
from sparkpoint.checkpoint.paths import comparable_path
from sparkpoint.fs import get_filesystem


def test_twenty_five_checkpoints_leave_exactly_the_referenced_files(
    storage_base: str, tmp_path: Path
) -> None:
    lines: list[dict[str, object]] = []
    result = run_soak(
        f"{storage_base}/checkpoints",
        str(tmp_path / "local"),
        checkpoints=25,
        retained=3,
        keys=5000,
        updates_per_epoch=300,
        audit_every=5,
        abort_every=7,
        report=lines.append,
    )
    assert result.checkpoints == 25
    assert result.aborted == 4  # checkpoints 7, 14, 21, 28
    assert [line["completed_checkpoints"] for line in lines] == [5, 10, 15, 20, 25]
    for audit in result.audits:
        assert audit.unreferenced == frozenset()
        assert audit.missing == frozenset()
        assert len(audit.checkpoint_ids) == 3
        # shared SSTs, private files and _metadata: far more than the 3 metadata files
        assert len(audit.files) > 8
    assert result.audits[-1].checkpoint_ids == (26, 27, 29)  # 28 was aborted
    assert result.restored_keys > 3000
    assert result.wrong_keys == 0


def test_the_audit_sees_a_stray_file_and_a_missing_one(tmp_path: Path) -> None:
    job = KeyedJob(str(tmp_path / "checkpoints"), str(tmp_path / "local"), retained=2)
    for epoch in range(6):
        job.run_epoch({k: epoch for k in range(epoch * 100, epoch * 100 + 300)})
        job.checkpoint()
    assert job.audit().exact
    shared = Path(job.job_dir) / "shared"
    stray = shared / "stray"
    stray.write_bytes(b"x")
    victim = sorted(shared.iterdir())[0]
    victim.unlink()
    audit = job.audit()
    job.close()
    assert audit.unreferenced == {str(stray)}
    assert audit.missing == {str(victim)}
    assert comparable_path(f"file://{stray}") == str(stray)
    fs = get_filesystem(job.job_dir)
    assert audit_checkpoint_directory(f"file://{job.job_dir}").files == audit.files
    assert fs.exists(str(stray))
