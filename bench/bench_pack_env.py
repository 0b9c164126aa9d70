"""Which packing tool ships a sparkpoint job's Python environment to bare workers: venv-pack
(a ``tar.gz`` for ``spark-submit --archives``) against PEX (one ``.pex`` file for ``--files``);
conda-pack needs a conda environment, and none is installed here. Prints one JSON line per
tool and setting:

    pip install pex venv-pack      # the tools (venv-pack is in sparkpoint's `deploy` extra)
    python bench/bench_pack_env.py

The environment is sparkpoint's dependencies without PySpark (executors take Spark's own
``pyspark.zip``) and this checkout as a wheel (``tests.fixtures.packed_env``). Per tool:
``build_s`` (packing), ``bytes`` (what every executor downloads), ``unpack_s`` (what Spark
does once per executor: untar; a PEX is not unpacked by Spark but by its first run, so its
``cold_start_s`` includes that), ``cold_start_s`` and ``warm_start_s`` (a Python worker's
start: the interpreter importing what a sparkpoint task imports, the first time and again).
Baseline in the same run: ``installed``, the same imports from the virtualenv itself (the
packages installed on the worker, nothing shipped). Each time is the median of ``--repeats``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.fixtures.packed_env import install_checkout, sparkpoint_venv

# What a Python worker imports to run a sparkpoint task (besides PySpark itself).
_TASK_IMPORTS = "import pyarrow, pandas, rocksdict, sparkpoint.runtime.task.stage_task"


def _spark_python_path() -> str:
    """PySpark as an executor's Python worker gets it: Spark's zips, not an installed copy."""
    import pyspark

    lib = Path(pyspark.__file__).parent / "python" / "lib"
    return os.pathsep.join(sorted(str(p) for p in lib.glob("*.zip")))


def _timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, capture_output=True, timeout=600)
    return time.perf_counter() - start


def _start(python: str, env: dict[str, str]) -> float:
    return _timed([python, "-c", _TASK_IMPORTS], env)


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def bench_venv_pack(venv: Path, work: Path, level: int, repeats: int, env: dict[str, str]):
    archive = work / f"env-{level}.tar.gz"
    builds, unpacks, colds, warms = [], [], [], []
    for i in range(repeats):
        archive.unlink(missing_ok=True)
        builds.append(_venv_pack(venv, archive, level))
        target = work / f"unpacked-{level}-{i}"
        target.mkdir()
        unpacks.append(_timed(["tar", "xzf", str(archive), "-C", str(target)]))
        python = str(target / "bin" / "python")
        colds.append(_start(python, env))
        warms.append(_start(python, env))
        shutil.rmtree(target)
    return {
        "tool": "venv-pack",
        "compress_level": level,
        "bytes": archive.stat().st_size,
        "build_s": _median(builds),
        "unpack_s": _median(unpacks),
        "cold_start_s": _median(colds),
        "warm_start_s": _median(warms),
    }


def _venv_pack(venv: Path, archive: Path, level: int) -> float:
    start = time.perf_counter()
    import venv_pack

    venv_pack.pack(prefix=str(venv), output=str(archive), compress_level=level, force=True)
    return time.perf_counter() - start


def bench_pex(venv: Path, work: Path, repeats: int, env: dict[str, str]):
    pex = shutil.which("pex")
    if pex is None:
        return {"tool": "pex", "error": "pex is not installed (pip install pex)"}
    output = work / "env.pex"
    builds, colds, warms = [], [], []
    for i in range(repeats):
        output.unlink(missing_ok=True)
        # Resolved from the same virtualenv (no index): the same distributions as venv-pack's.
        command = [pex, "--venv-repository", str(venv), "sparkpoint", "--exclude", "pyspark"]
        builds.append(_timed([*command, "-o", str(output)]))
        # PEX unpacks itself into PEX_ROOT on its first run: a fresh one per executor.
        run_env = dict(env, PEX_ROOT=str(work / f"pex-root-{i}"))
        colds.append(_start(str(output), run_env))
        warms.append(_start(str(output), run_env))
        shutil.rmtree(work / f"pex-root-{i}")
    return {
        "tool": "pex",
        "bytes": output.stat().st_size,
        "build_s": _median(builds),
        "unpack_s": None,
        "cold_start_s": _median(colds),
        "warm_start_s": _median(warms),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tools", default="venv-pack,pex", help="comma-separated")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=_spark_python_path())
    env.pop("PYTHONHOME", None)
    work = Path(tempfile.mkdtemp(prefix="bench-pack-"))
    try:
        with sparkpoint_venv() as venv:
            install_checkout(venv, work)
            python = str(venv / "bin" / "python")
            baseline = {
                "tool": "installed",
                "bytes": sum(f.stat().st_size for f in venv.rglob("*") if f.is_file()),
                "cold_start_s": _median([_start(python, env) for _ in range(args.repeats)]),
            }
            baseline["warm_start_s"] = baseline["cold_start_s"]
            print(json.dumps(baseline), flush=True)
            tools = args.tools.split(",")
            for level in (1, 4) if "venv-pack" in tools else ():
                print(json.dumps(bench_venv_pack(venv, work, level, args.repeats, env)), flush=True)
            if "pex" in tools:
                print(json.dumps(bench_pex(venv, work, args.repeats, env)), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
