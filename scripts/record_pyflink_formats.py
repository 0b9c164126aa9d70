"""Record what PyFlink 2.3 writes and reads in the Avro and CSV row formats, for the
differential tests in tests/connectors/formats/.

For every case of tests/connectors/formats/cases.json: the bytes sparkpoint writes now, then
(in the PyFlink venv, with Flink's ``flink-sql-avro`` jar from Maven Central on the gateway's
class path and the JVM in UTC, holding the shared heavy-job lock) the bytes PyFlink writes,
the rows PyFlink reads from its own bytes, from the case's messages and from sparkpoint's
bytes. All of it goes to tests/connectors/formats/pyflink_recorded.json.

    python scripts/record_pyflink_formats.py
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.connectors.formats import cases  # noqa: E402
from tests.fixtures.system import maven_artifacts  # noqa: E402

LOCK = "/tmp/sparkpoint-heavy.lock"
VENV = Path(os.environ.get("SPARKPOINT_PYFLINK_VENV", "~/.cache/sparkpoint/pyflink-venv"))
FLINK_VERSION = "2.3.0"
AVRO_JAR = f"org.apache.flink:flink-sql-avro:{FLINK_VERSION}"


def main() -> None:
    python = VENV.expanduser() / "bin" / "python"
    given = {"cases": cases.load_cases(), "sparkpoint": cases.sparkpoint_written()}
    lock = open(LOCK, "a")  # held until the process ends
    print(f"waiting for {LOCK}", flush=True)
    fcntl.flock(lock, fcntl.LOCK_EX)
    jars = maven_artifacts([AVRO_JAR])  # Maven runs a JVM too: under the lock
    env = {
        **os.environ,
        "HADOOP_CLASSPATH": os.pathsep.join(map(str, jars)),
        "FLINK_ENV_JAVA_OPTS": "-Duser.timezone=UTC",
    }
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.json", Path(tmp) / "out.json"
        src.write_text(json.dumps(given), encoding="utf-8")
        probe = ROOT / "scripts" / "pyflink_formats_probe.py"
        subprocess.run([str(python), str(probe), str(src), str(dst)], env=env, check=True)
        recorded = json.loads(dst.read_text(encoding="utf-8"))
    version = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('apache-flink'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    out = {
        "apache-flink": version,
        "jars": [AVRO_JAR, "flink-csv and flink-python as PyFlink ships them"],
        "jvm_time_zone": "UTC",
        "sparkpoint_written": given["sparkpoint"],
        **recorded,
    }
    text = json.dumps(out, indent=1, ensure_ascii=False) + "\n"
    cases.RECORDED.write_text(text, encoding="utf-8")
    print(f"wrote {cases.RECORDED}")


if __name__ == "__main__":
    main()
