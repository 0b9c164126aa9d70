"""Importing a real Flink savepoint of a Kafka -> keyed state -> Kafka PyFlink job (issue 42's
fourth program, kafka_counts.py, recorded by scripts/record_flink_kafka_savepoints.py): the
source's split offsets become the splits sparkpoint's KafkaSource restores, and the job
resumed on sparkpoint writes to Kafka what PyFlink wrote when it resumed.

The expected offsets and counts are computed here from kafka_counts_states' input.
"""

from __future__ import annotations

import collections
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.state_processor.flink import (
    UnsupportedFlinkStateError,
    import_flink_savepoint,
    read_metadata_file,
    read_pyflink_keyed_state,
)
from sparkpoint.state_processor.flink.kafka_splits import KafkaSplit, read_kafka_splits
from sparkpoint.state_processor.flink.source_state import JOB_MASTER_STATE_NAME
from tests.fixtures.kafka import KafkaBroker, kafka_broker
from tests.state_processor.flink_savepoints import kafka_counts_states as data
from tests.state_processor.test_flink_import import HERE

__all__ = ["kafka_broker"]

BACKENDS = ["hashmap", "rocksdb"]


def recorded() -> dict:
    return json.loads((HERE / "recorded_kafka.json").read_text())


def savepoint(backend: str) -> str:
    return str(HERE / "kafka_counts" / backend / "savepoint")


def expected_splits() -> list[KafkaSplit]:
    """Behind the first half in each partition, stopping at the end of both halves."""
    first = collections.Counter(data.partition_of(k) for k, _ in data.FIRST_HALF)
    both = collections.Counter(data.partition_of(k) for k, _ in data.FIRST_HALF + data.SECOND_HALF)
    return [KafkaSplit(data.TOPIC_IN, p, first[p], both[p]) for p in range(data.PARTITIONS)]


def expected_counts() -> dict[int, dict[str, int]]:
    state: dict[int, dict[str, int]] = {}
    for key, amount in data.FIRST_HALF:
        s = state.setdefault(key, {"count": 0, "total": 0})
        s["count"] += 1
        s["total"] += amount
    return state


@pytest.mark.parametrize("backend", BACKENDS)
def test_reads_the_kafka_sources_split_offsets(backend: str) -> None:
    metadata = read_metadata_file(savepoint(backend))
    assert read_kafka_splits(metadata, "source", "sp") == expected_splits()
    keyed = read_pyflink_keyed_state(metadata, "counter", data.STATES["counter"], "sp")
    assert keyed.values == expected_counts()  # LONG keys read by Flink's LongSerializer


@pytest.mark.parametrize("backend", BACKENDS)
def test_import_writes_the_offsets_where_the_kafka_source_restores_them(
    backend: str, tmp_path: Path
) -> None:
    from sparkpoint.connectors.kafka_offsets import KafkaOffsetsInitializer
    from sparkpoint.connectors.kafka_source import KafkaSource
    from sparkpoint.connectors.source import SourceSplit
    from sparkpoint.runtime.driver.master_state import MASTER_STATE_NAME, JobMasterState

    assert JOB_MASTER_STATE_NAME == MASTER_STATE_NAME
    target = import_flink_savepoint(
        savepoint(backend),
        str(tmp_path / "sp"),
        data.STATES,
        key_types=data.KEY_TYPES,
        kafka_sources=data.KAFKA_SOURCES,
    )
    master = JobMasterState.from_metadata(_metadata(target))
    assert master is not None and master.pending_sink_commits == ()
    splits = master.sources["source"]
    assert [SourceSplit.from_json(s) for s in splits] == [
        SourceSplit(
            f"{s.topic}-{s.partition}",
            s.offset,
            s.stopping_offset,
            {"topic": s.topic, "partition": s.partition},
        )
        for s in expected_splits()
    ]
    # the program's KafkaSource accepts them (its restore checks run before any Kafka call)
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers("127.0.0.1:1")
        .set_topics(data.TOPIC_IN)
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(_schema())
        .build()
    )
    source.check_restored_splits(splits, "imported", "sources['source']")


def _metadata(target: str) -> Any:
    from sparkpoint.checkpoint.metadata.file_format import load_checkpoint_metadata

    return load_checkpoint_metadata(Path(target, "_metadata").read_bytes(), target)


def _schema() -> Any:
    from sparkpoint.common import SimpleStringSchema

    return SimpleStringSchema()


def test_refuses_an_operator_that_is_not_a_kafka_source(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedFlinkStateError) as e:
        import_flink_savepoint(
            savepoint("hashmap"), str(tmp_path / "sp"), {}, kafka_sources=["counter"]
        )
    assert str(e.value) == (
        f"Flink savepoint {savepoint('hashmap')}: operator 'counter' subtask 0: the operator "
        "named as a Kafka source has keyed state; a source has none (is the uid the source's?)"
    )
    assert not (tmp_path / "sp").exists()
    with pytest.raises(UnsupportedFlinkStateError, match="no operator with uid 'kafka'"):
        import_flink_savepoint(
            savepoint("hashmap"), str(tmp_path / "sp"), {}, kafka_sources=["kafka"]
        )


def test_refuses_an_operator_without_source_reader_state(tmp_path: Path) -> None:
    """The sink (uid ``sink``) has operator state, of another name."""
    with pytest.raises(UnsupportedFlinkStateError) as e:
        import_flink_savepoint(
            savepoint("hashmap"), str(tmp_path / "sp"), {}, kafka_sources=["sink"]
        )
    assert str(e.value) == (
        f"Flink savepoint {savepoint('hashmap')}: operator 'sink' has no SourceReaderState "
        "operator state: it is not a source of the new source API (a KafkaSource)"
    )


def test_the_sinks_state_is_left_behind(tmp_path: Path) -> None:
    """Flink's KafkaSink state (its transactional ids, the savepoint's committables, which
    ``flink stop`` committed) is not imported: the sink operator is in the savepoint, and
    importing the rest does not need it."""
    metadata = read_metadata_file(savepoint("hashmap"))
    sink = metadata.operator("sink")
    assert sink is not None and any(s.managed_operator_state for s in sink.subtasks)
    target = import_flink_savepoint(
        savepoint("hashmap"),
        str(tmp_path / "sp"),
        data.STATES,
        key_types=data.KEY_TYPES,
        kafka_sources=data.KAFKA_SOURCES,
    )

    assert {op.operator_id for op in _metadata(target).operator_states} == {"counter"}


def test_cli_import_flink_with_a_kafka_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sparkpoint.cli.main import main

    module = "tests.state_processor.flink_savepoints.kafka_counts_states"
    target = str(tmp_path / "sp")
    code = main(
        [
            "savepoint",
            "import-flink",
            savepoint("hashmap"),
            target,
            "--states",
            f"{module}:STATES",
            "--key-types",
            f"{module}:KEY_TYPES",
            "--kafka-source",
            "source",
            "--job-name",
            "kafka counts",
        ]
    )
    assert code == 0
    assert capsys.readouterr().out.startswith("Imported counter, source -> ")
    from sparkpoint.runtime.driver.master_state import JobMasterState

    master = JobMasterState.from_metadata(_metadata(target))
    assert master is not None and master.job_name == "kafka counts"
    assert len(master.sources["source"]) == 2


# -- the differential test: sparkpoint resumes from the imported savepoint --------------------


@pytest.fixture(scope="module")
def input_topic(kafka_broker: KafkaBroker) -> str:
    """The input topic as PyFlink read it: both halves at the same offsets."""
    kafka_broker.create_topic(data.TOPIC_IN, data.PARTITIONS)
    data.produce(kafka_broker.bootstrap_servers, data.FIRST_HALF + data.SECOND_HALF)
    return data.TOPIC_IN


@pytest.mark.parametrize("backend", BACKENDS)
def test_resumes_kafka_offsets_and_keyed_state_as_pyflink_does(
    spark: Any, kafka_broker: KafkaBroker, input_topic: str, backend: str, tmp_path: Path
) -> None:
    from tests.connectors.kafka.kafka_jobs import read_committed
    from tests.differential.runner import run_program

    target = import_flink_savepoint(
        savepoint(backend),
        str(tmp_path / "imported"),
        data.STATES,
        key_types=data.KEY_TYPES,
        kafka_sources=data.KAFKA_SOURCES,
    )
    out = f"flink-savepoint-counts-out-{backend}"
    kafka_broker.create_topic(out, 2)
    args = ("second", kafka_broker.bootstrap_servers, input_topic, out, data.stops(), target)
    run_program(HERE / "kafka_counts.py", args)
    expected = recorded()["programs"][f"kafka_counts/{backend}"]["second_half"]
    assert len(expected) == len(data.SECOND_HALF)
    assert sorted(read_committed(kafka_broker.bootstrap_servers, out)) == expected


def test_savepoint_copies_are_relocatable(tmp_path: Path) -> None:
    """The savepoint names its files relative to its directory: a copy reads alike."""
    copy = tmp_path / "copy"
    shutil.copytree(savepoint("hashmap"), copy)
    assert read_kafka_splits(read_metadata_file(str(copy)), "source", "sp") == expected_splits()
