"""The key hash rule on disk (issue 29, item 8): every snapshot records, per keyed operator,
whether its keys were placed by their value or as a declared Java type; a snapshot without
the record (written before the typed rule) counts as the value rule; a restore whose program
places keys by another rule is refused naming the operator, and the state processor's
bootstrap places keys by the declared type, as the job does. Negative LONG keys are the
ones whose key groups differ between the two rules (``Long.hashCode``)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from sparkpoint.checkpoint.discovery import load_pointer
from sparkpoint.checkpoint.metadata import CheckpointMetadata, MasterState
from sparkpoint.checkpoint.metadata.file_format import store_checkpoint_metadata
from sparkpoint.common import Types
from sparkpoint.datastream import HashMapStateBackend
from sparkpoint.datastream.state import ValueStateDescriptor
from sparkpoint.errors import MetadataFormatError, RestoreError
from sparkpoint.state.key_groups import KeyGroupAssigner
from sparkpoint.state.key_hash_rules import (
    KEY_HASH_MASTER_STATE,
    check_key_hash_rule,
    key_hash_master_state,
    recorded_key_hash_rules,
)
from sparkpoint.state_processor import OperatorTransformation, SavepointWriter
from tests.state_processor import jobs

KEYS = list(range(-600, 600))


def _moved_keys(max_parallelism: int) -> int:
    """How many of KEYS the two rules put in different key groups."""
    typed, value = KeyGroupAssigner(Types.LONG()), KeyGroupAssigner()
    return sum(
        typed.key_group(k, max_parallelism) != value.key_group(k, max_parallelism) for k in KEYS
    )


def _bootstrap(spark: Any, path: Path, key_type: Any) -> str:
    df = spark.createDataFrame([(k, k * 2) for k in KEYS], "key long, count long")
    writer = SavepointWriter.new_savepoint(spark, 128)
    writer.with_operator(
        jobs.UID,
        OperatorTransformation.bootstrap_with(df.select("key", F.col("count")))
        .key_by("key", key_type)
        .transform(ValueStateDescriptor("count", Types.LONG()), parallelism=3),
    )
    return writer.write(str(path), file_state_size_threshold=0)


def _emit(spark: Any, tmp_path: Path, restore: str, key_type: Any) -> dict[int, Any]:
    """Restore ``restore`` into a job keyed with ``key_type`` (None: untyped); each key's
    restored count."""
    env = jobs.make_env(spark, str(tmp_path / "job"), 2, HashMapStateBackend(), restore=restore)
    got = list(
        env.from_collection(KEYS, type_info=Types.LONG())
        .key_by(lambda k: k, key_type=key_type)
        .process(jobs.EmitState())
        .uid(jobs.UID)
        .execute_and_collect()
    )
    assert len(got) == len(KEYS)
    return {g[0]: g[1] for g in got}


def _without_record(path: str) -> CheckpointMetadata:
    """Rewrite the snapshot's ``_metadata`` as a release before the record wrote it."""
    metadata, _ = load_pointer(path)
    legacy = dataclasses.replace(
        metadata,
        master_states=tuple(m for m in metadata.master_states if m.name != KEY_HASH_MASTER_STATE),
    )
    (Path(path) / "_metadata").write_bytes(store_checkpoint_metadata(legacy))
    return legacy


@pytest.mark.spark
def test_a_long_keyed_bootstrap_restores_exactly_in_a_long_keyed_job(
    spark: Any, tmp_path: Path
) -> None:
    assert _moved_keys(128) > 500  # the rules really differ for these keys
    path = _bootstrap(spark, tmp_path / "boot", Types.LONG())
    metadata, _ = load_pointer(path)
    assert recorded_key_hash_rules(metadata) == {jobs.UID: "LONG"}
    counts = _emit(spark, tmp_path, path, Types.LONG())
    assert counts == {k: k * 2 for k in KEYS}

    with pytest.raises(RestoreError) as info:
        _emit(spark, tmp_path / "untyped", path, None)
    message = str(info.value)
    assert f"uid {jobs.UID!r}" in message
    assert "placed in key groups as Java LONG keys" in message
    assert "the program places them by the key's value" in message


@pytest.mark.spark
def test_a_snapshot_without_the_record_counts_as_the_value_rule(spark: Any, tmp_path: Path) -> None:
    path = _bootstrap(spark, tmp_path / "boot", None)
    assert recorded_key_hash_rules(load_pointer(path)[0]) == {jobs.UID: "value"}
    legacy = _without_record(path)
    assert recorded_key_hash_rules(legacy) is None

    with pytest.raises(RestoreError) as info:
        _emit(spark, tmp_path / "typed", path, Types.LONG())
    message = str(info.value)
    assert f"uid {jobs.UID!r}" in message
    assert "by the key's value (written before the key hash rule was recorded)" in message
    assert "the program places them as Java LONG keys" in message

    counts = _emit(spark, tmp_path / "untyped", path, None)  # the value rule: exact
    assert counts == {k: k * 2 for k in KEYS}


# ---- the record on its own (no Spark) ----------------------------------------------------


def _metadata(*master_states: MasterState) -> CheckpointMetadata:
    return CheckpointMetadata(7, (), master_states)


@pytest.mark.parametrize(
    ("recorded", "rule", "refused"),
    [
        (None, "value", False),
        (None, "LONG", True),
        ({"op": "LONG"}, "LONG", False),
        ({"op": "LONG"}, "value", True),
        ({"op": "DOUBLE"}, "FLOAT", True),
        ({"other": "LONG"}, "value", False),  # not recorded: the value rule
    ],
)
def test_the_recorded_rule_decides(
    recorded: dict[str, str] | None, rule: str, refused: bool
) -> None:
    states = () if recorded is None else (key_hash_master_state(recorded),)
    metadata = _metadata(*states)
    if not refused:
        check_key_hash_rule(metadata, "op", rule, "operator 'counts'")
        return
    with pytest.raises(RestoreError, match=r"^Cannot restore the keyed state of operator "):
        check_key_hash_rule(metadata, "op", rule, "operator 'counts'")


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"operators": {"op": "INT64"}}, "unknown key hash rule 'INT64'"),
        ({"operators": ["op"]}, "has no 'operators' mapping"),
        ([1, 2], "has no 'operators' mapping"),
    ],
)
def test_a_malformed_record_is_refused(value: Any, error: str) -> None:
    metadata = _metadata(MasterState.from_json(KEY_HASH_MASTER_STATE, value))
    with pytest.raises(MetadataFormatError, match=re.escape(error)):
        recorded_key_hash_rules(metadata)
