"""SparkWriterSink without Spark: commit ids, staging of records, clear errors."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from sparkpoint.connectors.spark_writer import FileTarget, SparkWriterSink, commit_id

SCHEMA = StructType([StructField("word", StringType()), StructField("n", LongType())])


def test_commit_id_depends_on_the_staged_files_only() -> None:
    a = [("job", 3, 0, "/s/e3-s0-a0-x.parquet", 5), ("job", 4, 1, "/s/e4-s1-a0-y.parquet", 2)]
    assert commit_id(a) == commit_id(list(reversed(a)))
    assert commit_id(a).startswith("e3-4-")
    retried = [a[0], ("job", 4, 1, "/s/e4-s1-a1-z.parquet", 2)]
    assert commit_id(retried) != commit_id(a)


def test_records_are_staged_as_one_parquet_file(tmp_path: Any) -> None:
    sink = SparkWriterSink(
        SCHEMA, FileTarget("parquet", str(tmp_path / "out")), str(tmp_path / "staging")
    )
    writer = sink.create_writer("job", 7, 1, 2, 0)
    writer.write([("a", 1), {"word": "b", "n": 2}])
    writer.write([["c", None]])
    [(job, epoch, sub, path, rows)] = writer.prepare_commit()
    assert (job, epoch, sub, rows) == ("job", 7, 1, 3)
    assert pq.read_table(path).to_pylist() == [
        {"word": "a", "n": 1},
        {"word": "b", "n": 2},
        {"word": "c", "n": None},
    ]
    assert sink.create_writer("job", 8, 1, 2, 0).prepare_commit() == []
    sink.abort([(job, epoch, sub, path, rows)])
    assert not (tmp_path / "staging" / "job" / path.rsplit("/", 1)[1]).exists()


def test_a_record_that_does_not_match_the_schema_is_named(tmp_path: Any) -> None:
    sink = SparkWriterSink(SCHEMA, FileTarget("parquet", str(tmp_path)), str(tmp_path))
    with pytest.raises(TypeError, match=r"record \('a', 1, 2\) does not match the schema"):
        sink.columns([("a", 1, 2)])
    with pytest.raises(TypeError, match="StructType or a DDL string"):
        SparkWriterSink(42, FileTarget("parquet", str(tmp_path)), str(tmp_path))
