"""What submitting with a packed environment costs: ``sparkpoint run -d`` of the deploy tests'
keyed job (tests/deploy/project) to a standalone cluster of two workers on this machine whose
own Python is bare, timed from the command's start to the job id it prints
(``submit_to_job_id_s``: spark-submit, the driver, the SparkSession, the job's start) and to
the job's first committed output (``submit_to_first_output_s``: executors started, the
archive fetched and unpacked in each, the first epoch and its checkpoint); then the job is
cancelled (``sparkpoint cancel``). One JSON line per variant:

    python bench/bench_submit.py [--repeats 2]

* ``packed``: ``--pack-env`` (the archive packed beforehand, ``pack_s`` and ``bytes``, then
  reused), the executors' Python is ``./environment/bin/python`` of the unpacked archive;
* ``installed`` (the baseline, same cluster, same run): no archive; the executors' Python
  is the submitting virtualenv's own (``spark.pyspark.python``), as if the packages were
  installed on every worker.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.fixtures.packed_env import bare_python, install_checkout, packs_dir, sparkpoint_venv
from tests.fixtures.spark_cluster import StandaloneCluster, spark_home

PROJECT = Path(__file__).resolve().parent.parent / "tests" / "deploy" / "project"


def _committed(out: Path) -> bool:
    return out.is_dir() and any(
        f.is_file() and not f.name.startswith(".") and f.stat().st_size for f in out.iterdir()
    )


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "X"


def _submit(venv: Path, cluster: StandaloneCluster, work: Path, extra: list[str]) -> dict:
    run = Path(tempfile.mkdtemp(dir=work))
    project = run / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
    inputs = run / "in"
    inputs.mkdir()
    (inputs / "in-0.txt").write_text("".join(f"k{i % 7},1\n" for i in range(1000)))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    env.update(
        SPARK_HOME=spark_home(cluster.directory),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARKPOINT_PACK_CACHE=str(packs_dir(venv)),
        SPARKPOINT_JOBS_DIR=str(run / "jobs"),
    )
    command = [str(venv / "bin" / "sparkpoint"), "run", "--master", cluster.url, "-d"]
    command += ["--py-files", "counting.py", "--log-dir", str(run / "runs"), *extra]
    command += ["keyed_count.py", str(inputs), str(run / "out"), str(run / "ckpt")]
    start = time.monotonic()
    done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    job_id_s = time.monotonic() - start
    found = re.search(r"JobID ([0-9a-f]{32})", done.stdout)
    if done.returncode != 0 or found is None:
        raise RuntimeError(done.stdout + done.stderr)
    while not _committed(run / "out"):
        if time.monotonic() - start > 600:
            raise RuntimeError("no output within 600 s")
        time.sleep(0.05)
    first_output_s = time.monotonic() - start
    cancel = [str(venv / "bin" / "sparkpoint"), "cancel", found.group(1)]
    subprocess.run(cancel, env=env, cwd=run, check=True, capture_output=True)
    driver = int(re.search(r"driver pid (\d+)", done.stdout).group(1))  # type: ignore[union-attr]
    while _state(driver) not in ("Z", "X"):
        time.sleep(0.1)
    return {"submit_to_job_id_s": job_id_s, "submit_to_first_output_s": first_output_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-submit-"))
    try:
        with sparkpoint_venv() as venv:
            install_checkout(venv, work)
            shutil.rmtree(packs_dir(venv), ignore_errors=True)  # pack now, timed
            sys_path_free = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            start = time.monotonic()
            packed = subprocess.run(
                [
                    str(venv / "bin" / "python"),
                    "-c",
                    "from sparkpoint.cli.pack_env import "
                    "pack_environment as p; import sys; r = p(sys.prefix); print(r.path, r.size)",
                ],
                env=dict(sys_path_free, SPARKPOINT_PACK_CACHE=str(packs_dir(venv))),
                cwd=work,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            pack_s = time.monotonic() - start
            cluster = StandaloneCluster(
                str(work / "cluster"), workers=2, worker_python=str(bare_python(work))
            )
            os.makedirs(cluster.directory)
            cluster.start()
            try:
                variants = {
                    "installed": ["--conf", f"spark.pyspark.python={venv / 'bin' / 'python'}"],
                    "packed": ["--pack-env"],
                }
                results: dict[str, list[dict]] = {name: [] for name in variants}
                for _ in range(args.repeats):
                    for name, extra in variants.items():
                        results[name].append(_submit(venv, cluster, work, extra))
            finally:
                cluster.stop()
            for name, runs in results.items():
                line = {"variant": name, "workers": 2, "repeats": len(runs)}
                for key in runs[0]:
                    line[key] = round(statistics.median(r[key] for r in runs), 1)
                if name == "packed":
                    line.update(pack_s=round(pack_s, 1), bytes=int(packed[1]))
                print(json.dumps(line), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
