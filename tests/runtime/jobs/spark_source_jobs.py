"""Jobs of the Spark streaming source tests (importable by Python workers and the driver
script ``spark_source_driver.py``)."""

from __future__ import annotations

import json
import os
from typing import Any

from sparkpoint.common import Encoder
from sparkpoint.connectors.spark_source import SparkStreamSource
from sparkpoint.datastream.connectors.file_system import FileSink
from sparkpoint.testing import CountAndEcho, FailureInjector

N_FILES = 8
PER_FILE = 250
N_KEYS = 7


def write_input(directory: str) -> None:
    """``N_FILES`` JSON-lines files of ``{"x": ...}``, x = 0 .. N_FILES * PER_FILE - 1."""
    os.makedirs(directory, exist_ok=True)
    for f in range(N_FILES):
        with open(os.path.join(directory, f"in-{f:03d}.json"), "w") as out:
            for x in range(f * PER_FILE, (f + 1) * PER_FILE):
                out.write(json.dumps({"x": x}) + "\n")


def file_stream(spark: Any, directory: str) -> Any:
    """Spark's file source over ``directory``, one file per micro-batch."""
    return spark.readStream.schema("x BIGINT").option("maxFilesPerTrigger", 1).json(directory)


def source_job(
    env: Any,
    source: SparkStreamSource,
    out_dir: str,
    n_keys: int,
    map_injector: FailureInjector | None = None,
) -> None:
    """rows -> (x % keys, x) -> key_by -> CountAndEcho -> exactly-once FileSink."""

    def to_pair(row: Any) -> tuple[int, int]:
        x = int(row["x"] if "x" in row.as_dict() else row["value"])
        if map_injector is not None:
            map_injector.maybe_fail(x)
        return (x % n_keys, x)

    (
        env.from_source(source, None, "spark-stream")
        .uid("spark-stream")
        .map(to_pair)
        .uid("to-pair")
        .key_by(lambda p: p[0])
        .process(CountAndEcho())
        .uid("count")
        .sink_to(FileSink.for_row_format(out_dir, Encoder.simple_string_encoder()).build())
        .uid("sink")
    )
