"""A keyed running sum over the text files of a directory (new files too), exactly once into
files: the job the deploy tests submit with ``sparkpoint run`` to bare workers.

    keyed_count.py INPUT_DIR OUTPUT_DIR CHECKPOINT_DIR [STOP_FILE]

Its functions live in ``counting`` (the project's own module, shipped with --py-files).
The restore path, when there is one, comes from ``sparkpoint run -s`` through the
environment, as in Flink: the program does not name it. With STOP_FILE, the job stops with
a savepoint into the directory that file names once it appears, and writes the savepoint's
path to ``STOP_FILE.done`` (a stop from outside the driver process without a REST endpoint).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from counting import add, parse, show

from sparkpoint.common import Duration, Encoder, WatermarkStrategy
from sparkpoint.datastream import FileSystemCheckpointStorage, StreamExecutionEnvironment
from sparkpoint.datastream.connectors.file_system import FileSink, FileSource, StreamFormat


def main(input_dir: str, output_dir: str, checkpoint_dir: str, stop_file: str = "") -> None:
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
    if not stop_file:
        env.execute("keyed-count")
        return
    client = env.execute_async("keyed-count")
    while not os.path.exists(stop_file):
        if client.get_job_execution_result().done():
            client.wait()  # raises the job's failure
            return
        time.sleep(0.1)
    target = Path(stop_file).read_text().strip()
    savepoint = client.stop_with_savepoint(False, target).result(timeout=300)
    client.wait(timeout=300)
    Path(stop_file + ".done").write_text(str(savepoint))


if __name__ == "__main__":
    main(*sys.argv[1:5])
