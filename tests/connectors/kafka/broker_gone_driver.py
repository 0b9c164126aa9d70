"""An unbounded Kafka → running sum → Kafka EXACTLY_ONCE job as its own driver process, so a
test can read everything the job logs (driver, Spark's JVM and its Python workers, and
librdkafka's own stderr lines) from one file: the process's stderr.

Usage: ``broker_gone_driver.py <json>`` with bootstrap, name (topics ``<name>-in`` and
``<name>-out``, transactional id prefix) and dir (checkpoints). Prints ``RUNNING <job id>``
once the job runs, then cancels it when a line ``cancel`` arrives on stdin and prints
``RESULT {...}`` (its status and how long the cancel took).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)


def _parse(line: str) -> tuple[int, int]:
    k, x = line.split(",")
    if int(x) < 2:  # the first record of each partition: a line from the worker's process
        logging.getLogger("broker_gone_driver").info("worker %d parses %s", os.getpid(), x)
    return int(k), int(x)


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0], a[1] + b[1]


def _format(kv: tuple[int, int]) -> str:
    return f"{kv[0]},{kv[1]}"


def main() -> None:
    job: dict[str, Any] = json.loads(sys.argv[1])
    os.environ["PYTHONPATH"] = os.pathsep.join([os.environ.get("PYTHONPATH", ""), ROOT])
    from sparkpoint.common import (
        Configuration,
        RestartStrategies,
        SimpleStringSchema,
        WatermarkStrategy,
    )
    from sparkpoint.datastream import FileSystemCheckpointStorage, StreamExecutionEnvironment
    from sparkpoint.datastream.connectors.kafka import (
        DeliveryGuarantee,
        KafkaOffsetsInitializer,
        KafkaRecordSerializationSchema,
        KafkaSink,
        KafkaSource,
    )
    from sparkpoint.runtime.spark.session import get_spark_session

    spark = get_spark_session("local[2,4]")
    bootstrap, name = job["bootstrap"], job["name"]
    conf = Configuration()
    conf.set_string("sparkpoint.local-state.dir", os.path.join(job["dir"], "local"))
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(2)
    env.enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage(os.path.join(job["dir"], "ckpt"))
    )
    # A job whose broker went away fails over until it comes back (here: never), as a job
    # left running for days would; the test cancels it.
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1_000_000, 5000))
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(bootstrap)
        .set_topics(f"{name}-in")
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(SimpleStringSchema())
        .build()
    )
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(bootstrap)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(f"{name}-out")
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix(name)
        .build()
    )
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka")
        .uid("source")
        .map(_parse)
        .key_by(lambda kv: kv[0])
        .reduce(_add)
        .uid("sum")
        .map(_format)
        .sink_to(sink)
        .uid("sink")
    )
    client = env.execute_async(name)
    print(f"RUNNING {client.get_job_id()}", flush=True)
    for line in sys.stdin:
        if line.strip() == "cancel":
            break
    ended_before = client.get_job_execution_result().done()
    status_before = client.get_job_status().result().name
    t0 = time.monotonic()
    error = None
    try:
        client.cancel().result(timeout=120)
        client.wait(timeout=120)
    except Exception as e:  # reported to the test, which asserts there was none
        error = repr(e)
    out = {
        "ended_before_cancel": ended_before,
        "status_before_cancel": status_before,
        "status": client.get_job_status().result().name,
        "cancel_seconds": round(time.monotonic() - t0, 2),
        "error": error,
        "restarts": client.job_master.progress.restarts,
    }
    print("RESULT " + json.dumps(out), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
