"""Jobs and process functions of the state processor tests (importable by Spark's workers).

``StatefulEcho`` keeps four states per key (typed VALUE, LIST and MAP state and an untyped
VALUE) and echoes every record, so that the state of a savepoint follows from what the
exactly-once sink committed up to it. ``EmitState`` is registered under the same uid by the
jobs that restore a written savepoint: for every key it receives it emits that key's state.
"""

from __future__ import annotations

import ast
import os
import time
from collections.abc import Iterable
from typing import Any

from sparkpoint.common import Configuration, Encoder, Types
from sparkpoint.connectors.number_seq import NumberSequenceSource
from sparkpoint.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from sparkpoint.datastream.checkpoint_storage import FileSystemCheckpointStorage
from sparkpoint.datastream.connectors.file_system import FileSink
from sparkpoint.datastream.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)

UID = "stateful"


def descriptors() -> list[Any]:
    """The states of ``StatefulEcho`` and ``EmitState``."""
    return [
        ValueStateDescriptor("count", Types.LONG()),
        ListStateDescriptor("seen", Types.STRING()),
        MapStateDescriptor("buckets", Types.STRING(), Types.LONG()),
        ValueStateDescriptor("last"),  # untyped: pickled
    ]


class _WithStates(KeyedProcessFunction):
    """Registers the states of ``descriptors()``."""

    def open(self, runtime_context: Any) -> None:
        count, seen, buckets, last = descriptors()
        self.count = runtime_context.get_state(count)
        self.seen = runtime_context.get_list_state(seen)
        self.buckets = runtime_context.get_map_state(buckets)
        self.last = runtime_context.get_state(last)


class StatefulEcho(_WithStates):
    """Per key: a count, the multiples of 5 as strings, sums by ``x % 3`` and the last record
    as a pickled tuple; echoes ``("rec", key, x)``."""

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any]:
        key, x = value
        self.count.update((self.count.value() or 0) + 1)
        if x % 5 == 0:
            self.seen.add(str(x))
        b = str(x % 3)
        self.buckets.put(b, (self.buckets.get(b) or 0) + x)
        self.last.update(("last", x))
        yield ("rec", key, x)


class EmitState(_WithStates):
    """For each key received: ``(key, count, seen, buckets, last)`` of its state."""

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any]:
        yield (
            ctx.get_current_key(),
            self.count.value(),
            list(self.seen.get()),
            dict(self.buckets.items()),
            self.last.value(),
        )


def expected_state(records: Iterable[tuple[int, int]]) -> dict[int, tuple[Any, ...]]:
    """The state ``StatefulEcho`` holds after ``(key, x)`` records, x ascending per key."""
    out: dict[int, tuple[Any, ...]] = {}
    for key, x in sorted(records, key=lambda r: r[1]):
        count, seen, buckets, _ = out.get(key, (0, [], {}, None))
        buckets = dict(buckets)
        buckets[str(x % 3)] = buckets.get(str(x % 3), 0) + x
        out[key] = (count + 1, [*seen, str(x)] if x % 5 == 0 else seen, buckets, ("last", x))
    return out


def make_env(
    spark: Any,
    tmp: str,
    parallelism: int,
    backend: Any = None,
    restore: str | None = None,
    ignore_unclaimed: bool = False,
    epoch_records: int = 400,
) -> StreamExecutionEnvironment:
    """An environment with checkpoints under ``tmp`` and epochs of ``epoch_records`` records
    per split (small, so that a job can be stopped midway)."""
    conf = Configuration()
    if ignore_unclaimed:
        conf.set_string("execution.savepoint.ignore-unclaimed-state", "true")
    conf.set_string("sparkpoint.epoch.max-records-per-split", str(epoch_records))
    conf.set_string("sparkpoint.local-state.dir", os.path.join(tmp, "local"))
    if restore is not None:
        conf.set_string("execution.savepoint.path", restore)
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(parallelism)
    env.enable_checkpointing(10)
    if backend is not None:
        env.set_state_backend(backend)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage(
            os.path.join(tmp, "ckpt"), savepoint_path=os.path.join(tmp, "sp")
        )
    )
    return env


def stateful_job(env: StreamExecutionEnvironment, out_dir: str, n_events: int, n_keys: int) -> None:
    """numbers -> (x % keys, x) -> key_by -> StatefulEcho -> exactly-once file sink."""
    (
        env.from_source(NumberSequenceSource(0, n_events - 1), None, "numbers")
        .uid("numbers")
        .set_parallelism(1)
        .map(lambda x: (x % n_keys, x))
        .uid("to-pair")
        .key_by(lambda p: p[0])
        .process(StatefulEcho())
        .uid(UID)
        .sink_to(FileSink.for_row_format(out_dir, Encoder.simple_string_encoder()).build())
        .uid("sink")
    )


def stop_with_savepoint_after(env: StreamExecutionEnvironment, epochs: int) -> str:
    """Run the job until ``epochs`` epochs ran, then stop it with a savepoint."""
    client = env.execute_async("state-processor")
    master = client.job_master
    while master.progress.epochs_run < epochs:
        assert not client.get_job_execution_result().done(), "job ended before the stop"
        time.sleep(0.05)
    path = client.stop_with_savepoint(False).result(timeout=120)
    client.wait(timeout=120)
    return str(path)


def echoed(out_dir: str) -> list[tuple[int, int]]:
    """The ``(key, x)`` of every committed ``("rec", key, x)`` line of the sink."""
    recs = []
    for name in sorted(os.listdir(out_dir)):
        path = os.path.join(out_dir, name)
        if name.startswith(".") or os.path.isdir(path):
            continue
        with open(path) as f:
            for line in f:
                if line.strip():
                    _, key, x = ast.literal_eval(line)
                    recs.append((key, x))
    return recs


def emit_state_job(env: StreamExecutionEnvironment, keys: list[Any]) -> list[tuple[Any, ...]]:
    """Restore ``EmitState`` under ``UID`` and collect the state of ``keys``."""
    return list(
        env.from_collection(keys)
        .key_by(lambda k: k)
        .process(EmitState())
        .uid(UID)
        .execute_and_collect()
    )
