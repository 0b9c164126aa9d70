"""PyFlink's graph-shaping and resource calls: ``SlotSharingGroup`` (builder, resources,
Flink's validation), ``slot_sharing_group`` with a name or a group, ``set_description``,
``register_slot_sharing_group``: recorded on the operators and shown by
``get_execution_plan``; two resource specs for one group fail as in Flink. No Spark."""

from __future__ import annotations

import json
import warnings

import pytest

from sparkpoint.common import (
    CompletableFuture,
    ConfigOptions,
    Configuration,
    Duration,
    Instant,
    JobClient,
    JobID,
    Row,
    RowKind,
)
from sparkpoint.datastream import (
    AsyncRetryStrategies,
    MemorySize,
    SlotSharingGroup,
    StreamExecutionEnvironment,
)


def _plan(env: StreamExecutionEnvironment) -> dict[str, dict]:
    return {n["contents"]: n for n in json.loads(env.get_execution_plan())["nodes"]}


def test_groups_and_descriptions_are_in_the_plan() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    heavy = (
        SlotSharingGroup.builder("heavy")
        .set_cpu_cores(2)
        .set_task_heap_memory_mb(512)
        .set_task_off_heap_memory(MemorySize(bytes_size=1024))
        .set_managed_memory_mb(0)
        .set_external_resource("gpu", 1)
        .build()
    )
    env.register_slot_sharing_group(heavy)
    ds = env.from_collection([1, 2]).map(lambda x: x * 2).name("double")
    ds.slot_sharing_group("heavy").set_description("doubles every record")
    ds.filter(lambda x: x > 2).name("big").slot_sharing_group(
        SlotSharingGroup.builder("light").build()
    ).print().name("big out")
    ds.print().name("out").set_description("to stdout").slot_sharing_group(heavy)
    plan = _plan(env)
    heavy_spec = {
        "cpu_cores": 2.0,
        "task_heap_memory_bytes": 512 << 20,
        "task_off_heap_memory_bytes": 1024,
        "managed_memory_bytes": 0,
        "external_resources": {"gpu": 1.0},
    }
    assert plan["double"]["slot_sharing_group"] == "heavy"
    assert plan["double"]["resources"] == heavy_spec  # from register_slot_sharing_group
    assert plan["double"]["description"] == "doubles every record"
    assert plan["out"]["resources"] == heavy_spec and plan["out"]["description"] == "to stdout"
    assert plan["big"]["slot_sharing_group"] == "light" and "resources" not in plan["big"]
    assert "slot_sharing_group" not in plan["Collection Source"]


def test_two_resource_specs_for_one_group_fail_as_in_flink() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    one = SlotSharingGroup.builder("g").set_cpu_cores(1).set_task_heap_memory_mb(100).build()
    two = SlotSharingGroup.builder("g").set_cpu_cores(2).set_task_heap_memory_mb(100).build()
    ds = env.from_collection([1]).map(lambda x: x).slot_sharing_group(one)
    ds.print().slot_sharing_group(two)
    with pytest.raises(ValueError, match="slot sharing group g has been configured with two"):
        env.get_execution_plan()


def test_the_builder_validates_as_flink() -> None:
    with pytest.raises(ValueError, match="cpu cores and task heap memory are required"):
        SlotSharingGroup.builder("g").set_cpu_cores(1).build()
    with pytest.raises(ValueError, match="cpu cores and task heap memory are required"):
        SlotSharingGroup.builder("g").set_managed_memory_mb(10).build()
    with pytest.raises(ValueError, match="cpu cores should be positive"):
        SlotSharingGroup.builder("g").set_cpu_cores(0)
    with pytest.raises(TypeError, match="name or a SlotSharingGroup"):
        StreamExecutionEnvironment.get_execution_environment().from_collection([1]).map(
            lambda x: x
        ).slot_sharing_group(3)  # type: ignore[arg-type]
    group = SlotSharingGroup.builder("g").set_cpu_cores(0.5).set_task_heap_memory_mb(1).build()
    assert group.get_name() == "g" and group.get_cpu_cores() == 0.5
    assert group.get_task_heap_memory() == MemorySize.of_mebi_bytes(1)
    assert group.get_managed_memory() is None and group.get_external_resources() == {}
    assert str(MemorySize.of_mebi_bytes(3)) == "3 mb" and str(MemorySize(bytes_size=5)) == "5 bytes"
    assert MemorySize.of_mebi_bytes(2048).get_gibi_bytes() == 2


def test_the_calls_without_effect_are_accepted() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection([1])
    assert ds.cache() is ds
    with pytest.raises(TypeError, match="Cache for KeyedStream is not supported"):
        ds.key_by(lambda x: x).cache()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env.add_classpaths("file:///x.jar")
        env.add_python_archive("venv.zip", "venv")
        env.set_python_executable("venv/bin/python")
    assert [str(w.message).split(":")[0] for w in caught] == [
        "add_classpaths has no effect",
        "add_python_archive has no effect",
        "set_python_executable has no effect",
    ]
    assert "--archives venv.zip#venv" in str(caught[1].message)
    with pytest.raises(NotImplementedError, match="from_source"):
        env.create_input(object())
    assert env.is_chaining_of_operators_with_different_max_parallelism_enabled() is True
    assert env.is_unaligned_checkpoints_enabled() is False
    assert env.is_force_unaligned_checkpoints() is False
    assert env.get_checkpointing_consistency_mode() == env.get_checkpointing_mode()


def test_common_names() -> None:
    assert Instant.of_epoch_milli(-1) == Instant(-1, 999_000_000)
    assert Instant.of_epoch_milli(-1).to_epoch_milli() == -1
    assert Duration.of_nanos(3_000_000) == Duration.of_millis(3)
    with pytest.raises(ValueError, match="millisecond precision"):
        Duration.of_nanos(1)
    option = ConfigOptions.key("my.key").int_type().default_value(3)
    assert (option.key(), option.default_value(), option.has_default_value()) == ("my.key", 3, True)
    with pytest.raises(TypeError, match="must be a int"):
        ConfigOptions.key("my.key").int_type().default_value("3")
    assert not ConfigOptions.key("k").string_type().no_default_value().has_default_value()
    conf = Configuration.from_dict({"a": "1"}).set_bytearray("b", bytearray(b"\x00\xff"))
    assert conf.get_bytearray("b", bytearray()) == bytearray(b"\x00\xff")
    assert conf.get_bytearray("missing", bytearray(b"d")) == bytearray(b"d")
    assert Configuration.parse_list_value("[a, 'b']") == ["a", "b"]
    assert Configuration.parse_list_value("a;b") == ["a", "b"]
    row = Row.of_kind(RowKind.DELETE, 1, 2)
    assert row.get_row_kind() == RowKind.DELETE and tuple(row) == (1, 2)
    assert JobID("0" * 31 + "A").to_hex_string() == "0" * 31 + "a"
    with pytest.raises(ValueError, match="32 hexadecimal digits"):
        JobID("xyz")
    assert JobClient.__name__ == "JobClient" and hasattr(CompletableFuture, "exception")
    strategy = AsyncRetryStrategies.fixed_delay(2, 50, exception_predicate=lambda e: True)
    assert [strategy.can_retry(n) for n in (1, 2, 3)] == [True, True, False]
    assert strategy.get_backoff_time_millis(2) == 50
    predicate = strategy.get_retry_predicate()
    assert predicate.result_predicate() is None and predicate.exception_predicate()(None)
