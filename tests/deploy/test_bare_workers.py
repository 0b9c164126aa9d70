"""A job submitted as Spark users submit one: from a project directory, with ``sparkpoint run``,
to a standalone cluster whose two workers have a bare Python (``venv --without-pip``: no
PySpark, pyarrow, pandas or sparkpoint), the environment packed with venv-pack and the
project's own module shipped with ``--py-files``.

The virtualenv that runs ``sparkpoint run`` (and the driver) holds sparkpoint as a wheel and
its dependencies, no PySpark (spark-submit gives the driver Spark's own, as it gives every
executor); nothing here sets PYTHONPATH, so neither the driver nor the executors import this
checkout. Packing happens once per change of the sources (``tests.fixtures.packed_env``).
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.packed_env import (
    bare_python,
    install_checkout,
    other_minor_python,
    packs_dir,
    sparkpoint_venv,
)
from tests.fixtures.spark_cluster import StandaloneCluster, spark_home

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

PROJECT = Path(__file__).parent / "project"
KEYS = 7
LINES_PER_FILE = 2000
FIRST_FILES, LATER_FILES = 6, 2
_TIMEOUT = 300


@pytest.fixture(scope="module")
def deploy(tmp_path_factory: Any) -> Iterator[dict[str, Any]]:
    """The submitting virtualenv, a bare Python and a standalone cluster of two workers
    whose Python is that bare one."""
    work = tmp_path_factory.mktemp("deploy")
    with sparkpoint_venv() as venv:
        install_checkout(venv, work)
        bare = bare_python(work)
        cluster = StandaloneCluster(str(work / "cluster"), workers=2, worker_python=str(bare))
        os.makedirs(cluster.directory)
        cluster.start()
        try:
            yield {"venv": venv, "bare": bare, "cluster": cluster, "work": work}
        finally:
            cluster.stop()


def _cli_env(deploy: dict[str, Any]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    env.update(
        SPARK_HOME=spark_home(deploy["cluster"].directory),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARKPOINT_PACK_CACHE=str(packs_dir(deploy["venv"])),
        # Where the driver writes its jobs' REST address and token, and the commands look.
        SPARKPOINT_JOBS_DIR=str(deploy["work"] / "jobs"),
    )
    return env


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
    return project


def _write_inputs(directory: Path, first: int, count: int) -> collections.Counter[str]:
    """``count`` files of ``LINES_PER_FILE`` lines ``k<i>,1``; returns the lines per key."""
    directory.mkdir(exist_ok=True)
    per_key: collections.Counter[str] = collections.Counter()
    for f in range(first, first + count):
        keys = [f"k{(f * LINES_PER_FILE + i) % KEYS}" for i in range(LINES_PER_FILE)]
        per_key.update(keys)
        tmp = directory / f".in-{f}.txt"
        tmp.write_text("".join(f"{k},1\n" for k in keys))
        tmp.rename(directory / f"in-{f}.txt")  # the source sees whole files only
    return per_key


def _committed(out: Path) -> list[str]:
    """Every line of the sink's committed files (in-progress files are hidden)."""
    if not out.is_dir():
        return []
    return [
        line
        for f in sorted(out.iterdir())
        if f.is_file() and not f.name.startswith(".")
        for line in f.read_text().splitlines()
        if line
    ]


def _sparkpoint(deploy: dict[str, Any], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``sparkpoint`` command of the submitting virtualenv."""
    return subprocess.run(
        [str(deploy["venv"] / "bin" / "sparkpoint"), *args],
        cwd=cwd,
        env=_cli_env(deploy),
        capture_output=True,
        text=True,
        timeout=_TIMEOUT,
    )


def _run(deploy: dict[str, Any], project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _sparkpoint(deploy, project, "run", "--master", deploy["cluster"].url, *args)


def _ended(pid: int) -> bool:
    """Whether process ``pid`` (not a child of ours) has exited."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def _wait_for(predicate: Any, what: str, log: str = "") -> float:
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < _TIMEOUT, f"{what}: timed out\n{log}"
        time.sleep(0.1)
    return time.monotonic() - start


def _log_of(result: subprocess.CompletedProcess[str]) -> str:
    match = re.search(r"log (\S+spark-submit\.log)", result.stdout)
    return Path(match.group(1)).read_text()[-4000:] if match else ""


def test_the_python_of_the_workers_is_bare(deploy: dict[str, Any]) -> None:
    for module in ("sparkpoint", "pyspark", "pyarrow", "pandas", "rocksdict", "counting"):
        probe = subprocess.run(
            [str(deploy["bare"]), "-c", f"import {module}"],
            env={"PATH": os.environ["PATH"]},
            cwd=deploy["work"],  # not this checkout
            capture_output=True,
            text=True,
        )
        assert f"No module named '{module}'" in probe.stderr, module


def test_run_detached_stop_with_savepoint_and_resume_on_bare_workers(
    deploy: dict[str, Any], tmp_path: Path
) -> None:
    project = _project(tmp_path)
    inputs, out, ckpt = tmp_path / "in", tmp_path / "out", tmp_path / "ckpt"
    expected_counts = _write_inputs(inputs, 0, FIRST_FILES)
    job = ["keyed_count.py", str(inputs), str(out), str(ckpt)]
    common = ["-d", "--pack-env", "--py-files", "counting.py", "--log-dir", str(tmp_path / "runs")]
    # Text splits are read by byte ranges of 64 bytes a record: ~16 epochs for the input.
    small_epochs = ["-D", "sparkpoint.epoch.max-records-per-split=10"]

    start = time.monotonic()
    first = _run(deploy, project, *common, *small_epochs, *job)
    submitted_s = time.monotonic() - start
    assert first.returncode == 0, first.stdout + first.stderr
    found = re.search(r"^Job has been submitted with JobID ([0-9a-f]{32})$", first.stdout, re.M)
    assert found is not None, first.stdout
    job_id = found.group(1)
    assert re.search(r"^Dashboard: http://127\.0\.0\.1:\d+/$", first.stdout, re.M), first.stdout
    assert "Environment " in first.stderr and ".tar.gz" in first.stderr, first.stderr
    first_output_s = _wait_for(lambda: _committed(out), "first committed output", _log_of(first))
    listed = _sparkpoint(deploy, tmp_path, "list")
    assert re.search(rf"^{job_id}\s+RUNNING\s", listed.stdout, re.M), listed.stdout + listed.stderr

    stopped = _sparkpoint(
        deploy, tmp_path, "stop", "--savepoint-path", str(tmp_path / "savepoints"), job_id
    )
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr + _log_of(first)
    path = re.search(r"^Savepoint completed\. Path: (\S+)$", stopped.stdout, re.M)
    assert path is not None, stopped.stdout
    savepoint = path.group(1)
    assert os.path.isfile(os.path.join(savepoint.removeprefix("file://"), "_metadata")), savepoint
    driver = int(re.search(r"driver pid (\d+)", first.stdout).group(1))  # type: ignore[union-attr]
    _wait_for(lambda: _ended(driver), "spark-submit's exit after the stop", _log_of(first))
    before = _committed(out)
    total = sum(expected_counts.values())
    assert 0 < len(before) < total, (len(before), total)  # stopped mid-way

    expected_counts.update(_write_inputs(inputs, FIRST_FILES, LATER_FILES))
    total = sum(expected_counts.values())
    start = time.monotonic()
    second = _run(deploy, project, *common, "-s", savepoint, *job)
    resubmitted_s = time.monotonic() - start
    assert second.returncode == 0, second.stdout + second.stderr
    assert "unchanged, reused" in second.stderr, second.stderr  # packed once
    found = re.search(r"JobID ([0-9a-f]{32})$", second.stdout, re.M)
    assert found is not None and found.group(1) != job_id
    _wait_for(lambda: len(_committed(out)) >= total, "all input counted", _log_of(second))
    cancelled = _sparkpoint(deploy, tmp_path, "cancel", found.group(1))
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    driver = int(re.search(r"driver pid (\d+)", second.stdout).group(1))  # type: ignore[union-attr]
    _wait_for(lambda: _ended(driver), "spark-submit's exit after the cancel", _log_of(second))

    got = collections.Counter(_committed(out))
    expected = collections.Counter(
        f"{key},{n}" for key, count in expected_counts.items() for n in range(1, count + 1)
    )
    assert got == expected  # every running sum once: nothing lost, nothing twice
    print(
        json.dumps(
            {
                "measure": "sparkpoint run -d on 2 bare workers",
                "submit_to_job_id_s": round(submitted_s, 1),
                "job_id_to_first_committed_output_s": round(first_output_s, 1),
                "resubmit_to_job_id_s": round(resubmitted_s, 1),
                "archive_bytes": sum(
                    p.stat().st_size for p in packs_dir(deploy["venv"]).glob("*.tar.gz")
                ),
            }
        )
    )


def test_a_module_not_shipped_fails_the_job_within_its_first_epoch(
    deploy: dict[str, Any], tmp_path: Path
) -> None:
    project = _project(tmp_path)
    inputs, out, ckpt = tmp_path / "in", tmp_path / "out", tmp_path / "ckpt"
    _write_inputs(inputs, 0, 1)
    start = time.monotonic()
    # The project's module is not shipped (no --py-files): the driver imports it from the
    # project directory, the bare workers have no copy.
    done = _run(deploy, project, "--pack-env", "keyed_count.py", str(inputs), str(out), str(ckpt))
    elapsed = time.monotonic() - start
    text = done.stdout + done.stderr
    assert done.returncode != 0, text[-3000:]
    assert "cannot run: a Python worker could not load the job's tasks" in text, text[-3000:]
    assert "ModuleNotFoundError: No module named 'counting'" in text
    assert "restarts:" not in text  # at once, not after the restart strategy gave up
    assert not list(ckpt.glob("*/chk-*/_metadata"))  # within the first epoch
    assert _committed(out) == []
    print(
        json.dumps({"measure": "missing module: submit to failure", "seconds": round(elapsed, 1)})
    )


def test_a_worker_python_of_another_minor_version_fails_the_job_naming_both(
    deploy: dict[str, Any], tmp_path: Path
) -> None:
    other = other_minor_python()
    if other is None:
        pytest.fail("no CPython 3.9+ of another minor version under ~/.pyenv/versions")
    project = _project(tmp_path)
    inputs, out, ckpt = tmp_path / "in", tmp_path / "out", tmp_path / "ckpt"
    _write_inputs(inputs, 0, 1)
    worker_python = str(other / "bin" / "python3")
    done = _run(
        deploy,
        project,
        "--py-files",
        "counting.py",
        "--conf",
        f"spark.pyspark.python={worker_python}",
        "keyed_count.py",
        str(inputs),
        str(out),
        str(ckpt),
    )
    text = done.stdout + done.stderr
    assert done.returncode != 0, text[-3000:]
    assert "cannot run: the executors' Python is another minor version" in text, text[-3000:]
    versions = re.search(r"\[PYTHON_VERSION_MISMATCH\][^\n]*", text)
    assert versions is not None, text[-3000:]
    ours = "{}.{}".format(*sys.version_info[:2])
    theirs = subprocess.run(
        [worker_python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert ours in versions.group(0) and theirs in versions.group(0), versions.group(0)
    assert "restarts:" not in text
    assert not list(ckpt.glob("*/chk-*/_metadata"))
