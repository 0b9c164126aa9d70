"""Issue 12 item 7: PyFlink's ``SourceFunction``/``SinkFunction`` wrap Java classes. The names
import and build; ``add_source``/``add_sink`` refuse them with the replacement to use."""

from __future__ import annotations

import pytest

from sparkpoint.common import Encoder
from sparkpoint.connectors.number_seq import NumberSequenceSource
from sparkpoint.datastream import SinkFunction, SourceFunction, StreamExecutionEnvironment
from sparkpoint.datastream.connectors.file_system import FileSink
from sparkpoint.errors import JavaFunctionError


def test_add_source_names_the_replacement() -> None:
    env = StreamExecutionEnvironment()
    java_class = "org.apache.flink.streaming.api.functions.source.SocketTextStreamFunction"
    source = SourceFunction(java_class)
    with pytest.raises(JavaFunctionError) as info:
        env.add_source(source, "socket")
    assert str(info.value) == (
        "add_source() got a SourceFunction wrapping the Java class "
        "'org.apache.flink.streaming.api.functions.source.SocketTextStreamFunction': sparkpoint "
        "runs no JVM user code. Use from_source() with a sparkpoint Source: "
        "NumberSequenceSource, FileSource, SparkStreamSource (any spark.readStream source such "
        "as Kafka; docs/spark-sources.md), or from_collection()."
    )
    assert isinstance(info.value, TypeError)  # what PyFlink raises for a wrong source type
    with pytest.raises(JavaFunctionError, match=r"^add_source\(\) got 42: "):
        env.add_source(42)


def test_add_source_takes_a_sparkpoint_source() -> None:
    env = StreamExecutionEnvironment()
    stream = env.add_source(NumberSequenceSource(1, 3), "numbers")
    assert stream.get_name() == "numbers"


def test_add_sink_names_the_replacement(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = StreamExecutionEnvironment()
    stream = env.from_collection([1, 2])
    with pytest.raises(JavaFunctionError) as info:
        stream.add_sink(SinkFunction("com.example.MySink"))
    assert str(info.value) == (
        "add_sink() got a SinkFunction wrapping the Java class 'com.example.MySink': "
        "sparkpoint runs no JVM user code. Use sink_to() with a sparkpoint Sink: FileSink, "
        "SparkWriterSink (any Spark batch writer: Parquet, JDBC, Delta, ...; "
        "docs/spark-writers.md) or print()."
    )
    sink = FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder()).build()
    assert len(env._sinks) == 0
    stream.add_sink(sink)
    assert [node.sink for node in env._sinks] == [sink]
