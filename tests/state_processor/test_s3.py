"""The state processor on an object store (moto's S3 server): executors write and read the
state files with the driver's file-system options, kept operators are copied between
prefixes, and a job restores the result."""

from __future__ import annotations

from typing import Any

from sparkpoint.common import Types
from sparkpoint.datastream.state import ValueStateDescriptor
from sparkpoint.fs import get_filesystem
from sparkpoint.state_processor import OperatorTransformation, SavepointReader, SavepointWriter
from tests.fixtures.s3 import ensure_s3_configured
from tests.state_processor import jobs


def test_bootstrap_read_copy_and_restore_on_s3(spark: Any, s3_server: Any, tmp_path: Any) -> None:
    ensure_s3_configured(s3_server)
    base = s3_server.unique_prefix()
    count = ValueStateDescriptor("count", Types.LONG())
    df = spark.range(0, 3_000).selectExpr("id as key", "id * 3 as count")
    writer = SavepointWriter.new_savepoint(spark, 64)
    writer.with_operator(
        jobs.UID,
        OperatorTransformation.bootstrap_with(df).key_by("key").transform(count, parallelism=2),
    )
    first = writer.write(f"{base}/first", file_state_size_threshold=0)
    fs = get_filesystem(first)
    assert len([i for i in fs.list(first) if fs.name(i.path) != "_metadata"]) == 2

    rows = (
        SavepointReader.read(spark, first)
        .read_keyed_state(jobs.UID, key_type=Types.LONG())
        .collect()
    )
    assert sorted((r["key"], r["count"]) for r in rows) == [(k, 3 * k) for k in range(3_000)]

    copied = SavepointWriter.from_existing_savepoint(spark, first).write(f"{base}/copied")
    names = {fs.name(i.path) for i in fs.list(copied)}
    assert len(names) == 3 and not names & {fs.name(i.path) for i in fs.list(first)} - {"_metadata"}
    fs.delete(first, recursive=True)  # the copy is self-contained

    env = jobs.make_env(spark, str(tmp_path), 2, restore=copied, epoch_records=100_000)
    got = {g[0]: g[1] for g in jobs.emit_state_job(env, list(range(0, 3_000, 7)))}
    assert got == {k: 3 * k for k in range(0, 3_000, 7)}
