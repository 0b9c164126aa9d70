"""Record a Flink savepoint of a Kafka -> keyed state -> Kafka PyFlink job (kafka_counts.py),
and what the job writes to Kafka when PyFlink resumes from it.

For issue 42's fourth program, beside ``record_flink_savepoints.py`` (whose helpers it
uses): with a Kafka broker of ``tests/fixtures/kafka.py`` and flink-sql-connector-kafka from
Maven Central, holding the shared heavy-job lock, per state backend:

1. FIRST_HALF goes into the input topic; the first half reads it and stops with a savepoint
   (its source's split offsets point behind FIRST_HALF);
2. the savepoint is copied into ``tests/state_processor/flink_savepoints/kafka_counts/<backend>/``;
3. SECOND_HALF goes into the input topic; the second half resumes on PyFlink and reads up to
   the end (then stops with a savepoint: restored, PyFlink's bounded KafkaSource does not
   end by itself); what it wrote (a ``read_committed`` consumer) is recorded in
   ``recorded_kafka.json``.

    python scripts/record_flink_kafka_savepoints.py [--backend hashmap|rocksdb]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))
import record_flink_savepoints as base  # noqa: E402
import record_pyflink_goldens as goldens  # noqa: E402

from tests.fixtures.kafka import KafkaBroker  # noqa: E402
from tests.fixtures.system import maven_artifacts  # noqa: E402
from tests.state_processor.flink_savepoints import kafka_counts_states as data  # noqa: E402

FLINK_KAFKA = "org.apache.flink:flink-sql-connector-kafka:5.0.0-2.2"
BACKENDS = ("hashmap", "rocksdb")


def read_committed(bootstrap: str, topic: str) -> list[str]:
    from tests.connectors.kafka.kafka_jobs import read_committed as read

    return read(bootstrap, topic)


def record(venv: Path, backend: str, timeout: float, jar: str) -> dict[str, object]:
    program = base.FIXTURES / "kafka_counts.py"
    dest = base.FIXTURES / "kafka_counts" / backend
    broker = KafkaBroker()
    os.environ["FLINK_KAFKA_CONNECTOR_JAR"] = jar  # run() passes the environment on
    try:
        broker.start()
        bootstrap = broker.bootstrap_servers
        broker.create_topic(data.TOPIC_IN, data.PARTITIONS)
        for topic in ("out-first", "out-second"):
            broker.create_topic(topic, 2)
        data.produce(bootstrap, data.FIRST_HALF)
        with tempfile.TemporaryDirectory(prefix="flink-savepoint-") as tmp:
            work = Path(tmp)
            first_out = work / "first.out"
            base.run(
                venv,
                [
                    str(program),
                    "first",
                    bootstrap,
                    data.TOPIC_IN,
                    "out-first",
                    data.stops(),
                    str(first_out),
                    str(len(data.FIRST_HALF)),
                    backend,
                    f"file://{work / 'savepoints'}",
                ],
                first_out,
                work,
                timeout,
            )
            printed = first_out.read_text().splitlines()
            (where,) = [line.split(" ", 1)[1] for line in printed if line.startswith("SAVEPOINT ")]
            if dest.exists():
                shutil.rmtree(dest)
            dest.mkdir(parents=True)
            shutil.copytree(Path(where.removeprefix("file:")), dest / "savepoint")
            data.produce(bootstrap, data.SECOND_HALF)
            second_out = work / "second.out"
            base.run(
                venv,
                [
                    str(program),
                    "second-until",
                    bootstrap,
                    data.TOPIC_IN,
                    "out-second",
                    data.stops(),
                    str(dest / "savepoint"),
                    str(second_out),
                    str(len(data.SECOND_HALF)),
                    f"file://{work / 'savepoints-2'}",
                ],
                second_out,
                work,
                timeout,
            )
        return {
            "input": [f"{k},{a}" for k, a in data.FIRST_HALF + data.SECOND_HALF],
            "first_half": sorted(read_committed(bootstrap, "out-first")),
            "second_half": sorted(read_committed(bootstrap, "out-second")),
        }
    finally:
        broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=goldens.DEFAULT_VENV)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    parser.add_argument("--backend", choices=BACKENDS, action="append")
    opts = parser.parse_args()
    jar = str(maven_artifacts([FLINK_KAFKA])[0])
    record_file = base.FIXTURES / "recorded_kafka.json"
    recorded = json.loads(record_file.read_text()) if record_file.exists() else {}
    recorded.update(
        {
            "pyflink_version": goldens.installed_version(opts.venv),
            "connector": FLINK_KAFKA,
            "java": goldens.java_version(),
        }
    )
    programs = recorded.setdefault("programs", {})
    lock = open(base.LOCK, "a")  # held until the process ends
    print(f"waiting for {base.LOCK}", flush=True)
    fcntl.flock(lock, fcntl.LOCK_EX)
    for backend in opts.backend or BACKENDS:
        result = record(opts.venv, backend, opts.timeout, jar)
        programs[f"kafka_counts/{backend}"] = result
        record_file.write_text(json.dumps(recorded, indent=2) + "\n")
        print(f"recorded kafka_counts/{backend}: {len(result['second_half'])} lines", flush=True)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
