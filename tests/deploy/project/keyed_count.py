"""A keyed running sum over the text files of a directory (new files too), exactly once into
files: the job the deploy tests submit with ``sparkpoint run`` to bare workers.

    keyed_count.py INPUT_DIR OUTPUT_DIR CHECKPOINT_DIR

Its functions live in ``counting`` (the project's own module, shipped with --py-files).
The restore path, when there is one, comes from ``sparkpoint run -s`` through the
environment, as in Flink: the program does not name it. It runs until it is stopped or
cancelled (``sparkpoint stop``, ``sparkpoint cancel``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from counting import add, parse, show

from sparkpoint.common import Duration, Encoder, WatermarkStrategy
from sparkpoint.datastream import FileSystemCheckpointStorage, StreamExecutionEnvironment
from sparkpoint.datastream.connectors.file_system import FileSink, FileSource, StreamFormat


def main(input_dir: str, output_dir: str, checkpoint_dir: str) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage(Path(checkpoint_dir).as_uri())
    )
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), input_dir)
        .monitor_continuously(Duration.of_millis(200))
        .build()
    )
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "lines")
        .uid("lines")
        .map(parse)
        .uid("parse")
        .key_by(lambda pair: pair[0])
        .reduce(add)
        .uid("sum")
        .map(show)
        .uid("show")
        .sink_to(FileSink.for_row_format(output_dir, Encoder.simple_string_encoder()).build())
        .uid("sink")
    )
    env.execute("keyed-count")


if __name__ == "__main__":
    main(*sys.argv[1:4])
