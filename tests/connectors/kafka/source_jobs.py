"""Helpers of the Kafka source's semantic tests: producing records where and when a test
says, the tests' environment, polling a running job, and an unbounded source's builder."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from sparkpoint.common import Configuration, RestartStrategies, SimpleStringSchema
from sparkpoint.datastream import FileSystemCheckpointStorage, StreamExecutionEnvironment
from sparkpoint.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSourceBuilder
from sparkpoint.datastream.connectors.kafka import KafkaSource as _KafkaSource
from tests.epoch_mode import apply_test_epoch_mode
from tests.fixtures.kafka import ordered_producer


def produce(
    bootstrap: str, topic: str, records: Iterable[tuple[int, str | bytes, int | None]]
) -> int:
    """Write ``(partition, value, timestamp or None)`` records, in order; their count."""
    producer = ordered_producer(bootstrap)
    n = 0
    for partition, value, ts in records:
        data = value.encode() if isinstance(value, str) else value
        if ts is None:
            producer.produce(topic, data, partition=partition)
        else:
            producer.produce(topic, data, partition=partition, timestamp=ts)
        n += 1
        if n % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    return n


def source_env(
    spark: Any,
    tmp_path: Any,
    per_split: int,
    *,
    parallelism: int = 2,
    restore: str | None = None,
    checkpoint_ms: int | None = 10,
) -> Any:
    """An environment reading ``per_split`` records per split and epoch, checkpointing every
    ``checkpoint_ms`` (None: not at all) under ``tmp_path/ckpt``, savepoints under
    ``tmp_path/sp``, failing at the first error; restored from ``restore`` when given."""
    conf = Configuration()
    conf.set_string("sparkpoint.epoch.max-records-per-split", str(per_split))
    conf.set_string("sparkpoint.local-state.dir", str(tmp_path / "local"))
    if restore is not None:
        conf.set_string("execution.savepoint.path", restore)
    apply_test_epoch_mode(conf)
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(parallelism)
    if checkpoint_ms is not None:
        env.enable_checkpointing(checkpoint_ms)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage(str(tmp_path / "ckpt"), savepoint_path=str(tmp_path / "sp"))
    )
    env.set_restart_strategy(RestartStrategies.no_restart())
    return env


def unbounded_source(bootstrap: str) -> KafkaSourceBuilder:
    """A builder of an unbounded string source on ``bootstrap``, from the earliest offsets;
    the caller subscribes it."""
    return (
        _KafkaSource.builder()
        .set_bootstrap_servers(bootstrap)
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(SimpleStringSchema())
    )


def wait_for(client: Any, condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Poll ``condition`` while the job of ``client`` runs; fail after ``timeout`` s or if
    the job ended first."""
    deadline = time.monotonic() + timeout
    while not condition():
        result = client.get_job_execution_result()
        if result.done():
            result.result()  # raises the job's failure
            raise AssertionError(f"the job ended before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} after {timeout:.0f} s")
        time.sleep(0.05)


def run_epochs(client: Any, epochs: int, timeout: float = 60.0) -> None:
    """Wait until the job has run ``epochs`` more epochs."""
    progress = client.job_master.progress
    target = progress.epochs_run + epochs
    wait_for(client, lambda: progress.epochs_run >= target, f"{epochs} more epochs", timeout)


def cancel(client: Any) -> None:
    """Cancel the job and wait until it ended."""
    client.cancel().result(timeout=60)
    client.wait(timeout=60)
