"""Bootstrap a job's state from a DataFrame, transform a savepoint (drop keys, rescale
values) verified key by key in restored jobs, keep untouched operators by copy or by
reference, and refuse bad input with errors naming the column, state or key."""

from __future__ import annotations

import os
from typing import Any

import pytest
from pyspark.sql import functions as F

from sparkpoint.checkpoint.handles import FileStateHandle, RelativeFileStateHandle
from sparkpoint.common import Types
from sparkpoint.datastream import EmbeddedRocksDBStateBackend, HashMapStateBackend
from sparkpoint.datastream.state import ValueStateDescriptor
from sparkpoint.errors import StorageError
from sparkpoint.state_processor import OperatorTransformation, SavepointReader, SavepointWriter
from tests.state_processor import jobs

N = 20_000
LAST = Types.TUPLE([Types.STRING(), Types.LONG()])


def _frame(spark: Any, n: int) -> Any:
    """key, count = 2 key, seen (every 4th key), buckets, last = ("last", key)."""
    return spark.range(0, n).select(
        F.col("id").alias("key"),
        (F.col("id") * 2).alias("count"),
        F.when(F.col("id") % 4 == 0, F.array(F.col("id").cast("string"), F.lit("x"))).alias("seen"),
        F.create_map(F.lit("0"), F.col("id"), F.lit("1"), -F.col("id")).alias("buckets"),
        F.struct(F.lit("last").alias("f0"), F.col("id").alias("f1")).alias("last"),
    )


def _expected(key: int) -> tuple[Any, ...]:
    return (key * 2, [str(key), "x"] if key % 4 == 0 else [], {"0": key, "1": -key}, ("last", key))


def _bootstrap(spark: Any, df: Any, path: str, other: bool = False) -> str:
    writer = SavepointWriter.new_savepoint(spark, 128)
    writer.with_operator(
        jobs.UID,
        OperatorTransformation.bootstrap_with(df)
        .key_by("key")
        .transform(*jobs.descriptors(), types={"last": LAST}, parallelism=3),
    )
    if other:
        writer.with_operator(
            "other",
            OperatorTransformation.bootstrap_with(df.select("key", F.col("count").alias("n")))
            .key_by("key")
            .transform(ValueStateDescriptor("n", Types.LONG()), parallelism=2),
        )
    return writer.write(path, file_state_size_threshold=0)


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_bootstrap_then_a_job_reads_exactly_that_state(
    backend: str, spark: Any, tmp_path: Any
) -> None:
    path = _bootstrap(spark, _frame(spark, N), str(tmp_path / "boot"))
    (op,) = SavepointReader.read(spark, path).operators()
    assert (op.uid, op.parallelism, op.max_parallelism, op.subtasks_with_state) == (
        jobs.UID,
        3,
        128,
        3,
    )
    env = jobs.make_env(
        spark,
        str(tmp_path / "job"),
        2,
        HashMapStateBackend() if backend == "heap" else EmbeddedRocksDBStateBackend(),
        restore=path,
        epoch_records=100_000,
    )
    got = jobs.emit_state_job(env, [*range(N), -1])
    assert len(got) == N + 1
    by_key = {g[0]: g[1:] for g in got}
    assert by_key.pop(-1) == (None, [], {}, None)
    bad = [(k, v) for k, v in by_key.items() if v != _expected(k)]
    assert not bad, bad[:3]


@pytest.mark.parametrize("keep", ["copy", "reference"])
def test_transform_drops_keys_and_rescales_values_key_by_key(
    keep: str, spark: Any, tmp_path: Any
) -> None:
    n = 3_000
    old = _bootstrap(spark, _frame(spark, n), str(tmp_path / "old"), other=True)
    reader = SavepointReader.read(spark, old)
    df = reader.read_keyed_state(jobs.UID, key_type=Types.LONG())
    changed = df.filter(F.col("key") % 3 != 0).withColumn("count", F.col("count") * 10)
    writer = SavepointWriter.from_existing_savepoint(spark, old, keep=keep)
    writer.remove_operator(jobs.UID).with_operator(
        jobs.UID,
        OperatorTransformation.bootstrap_with(changed)
        .key_by("key")
        .transform(*reader.state_infos(jobs.UID)),
    )
    writer.change_operator_identifier("other", "renamed")
    new = writer.write(str(tmp_path / "new"))

    result = SavepointReader.read(spark, new)
    assert sorted(o.uid for o in result.operators()) == ["renamed", jobs.UID]
    kept = result.snapshot.operator("renamed")
    files = [h.delegate for s in kept.subtask_states.values() for h in s.managed_keyed_state]
    assert len(files) == 2
    if keep == "copy":  # self-contained: the kept operator's files were copied
        assert all(
            isinstance(f, RelativeFileStateHandle) and os.path.dirname(f.path) == new for f in files
        )
    else:  # referenced where they are
        assert all(type(f) is FileStateHandle and os.path.dirname(f.path) == old for f in files)
    other = result.read_keyed_state("renamed", key_type=Types.LONG()).collect()
    assert sorted((r["key"], r["n"]) for r in other) == [(k, 2 * k) for k in range(n)]

    env = jobs.make_env(
        spark, str(tmp_path / "job"), 2, restore=new, ignore_unclaimed=True, epoch_records=100_000
    )
    got = {g[0]: g[1:] for g in jobs.emit_state_job(env, list(range(n)))}
    for key in range(n):
        if key % 3 == 0:
            assert got[key] == (None, [], {}, None), key  # dropped
        else:
            count, *rest = _expected(key)
            assert got[key] == (count * 10, *rest), key  # rescaled, the rest unchanged


def test_bad_input_is_refused_and_leaves_nothing(spark: Any, tmp_path: Any) -> None:
    df = _frame(spark, 100)
    count = jobs.descriptors()[0]

    def write(frame: Any, *states: Any, path: str = "sp", **kw: Any) -> str:
        writer = SavepointWriter.new_savepoint(spark, 128)
        writer.with_operator(
            "op",
            OperatorTransformation.bootstrap_with(frame).key_by("key").transform(*states, **kw),
        )
        return writer.write(str(tmp_path / path))

    with pytest.raises(
        TypeError,
        match=r"state 'count' \(column 'count'\) is string, but "
        r"the state needs int64 \(LONG\); cast the column",
    ):
        write(df.withColumn("count", F.col("count").cast("string")), count)
    with pytest.raises(KeyError, match="no column 'nope'"):
        write(df, count, columns={"count": "nope"})
    with pytest.raises(Exception, match="key 7 appears in more than one row"):
        write(df.union(df.filter("key = 7")), count)
    assert not os.path.exists(tmp_path / "sp")  # the failed write deleted its directory

    os.makedirs(tmp_path / "busy")
    (tmp_path / "busy" / "keep.txt").write_text("mine")
    with pytest.raises(StorageError, match="exists and is not an empty directory"):
        write(df, count, path="busy")
    assert os.listdir(tmp_path / "busy") == ["keep.txt"]

    path = write(df, count, path="ok")
    with pytest.raises(ValueError, match="already contains uid 'op'"):
        SavepointWriter.from_existing_savepoint(spark, path).with_operator(
            "op", OperatorTransformation.bootstrap_with(df).key_by("key").transform(count)
        )
    reader = SavepointReader.read(spark, path)
    with pytest.raises(
        KeyError,
        match=r"Operator 'x' is not in the snapshot .* "
        r"\(operators: 'op'\)",
    ):
        reader.read_keyed_state("x")
    with pytest.raises(KeyError, match=r"no state \['nope'\] .* \(states: 'count'\)"):
        reader.read_keyed_state("op", states=["nope"])
