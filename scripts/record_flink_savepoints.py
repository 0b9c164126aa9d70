"""Record Flink savepoints of PyFlink programs, and what PyFlink prints when it resumes from them.

For issue 42 (importing a Flink savepoint). In the PyFlink virtualenv of
``record_pyflink_goldens.py`` (apache-flink from PyPI, never in the project's environment),
holding the shared heavy-job lock, for each program and each state backend:

1. the first half runs over an input file, and stops with a canonical savepoint once every
   record is printed;
2. the savepoint is copied into ``tests/state_processor/flink_savepoints/<program>/<backend>/``
   (relocatable: its ``_metadata`` names its files relative to its directory);
3. the second half resumes on PyFlink from the copy; its standard output is recorded.

``recorded.json`` there keeps the PyFlink, Java and Python versions and both halves' output.

    python scripts/record_flink_savepoints.py
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import record_pyflink_goldens as goldens  # noqa: E402 - the venv helpers

FIXTURES = ROOT / "tests" / "state_processor" / "flink_savepoints"
LOCK = "/tmp/sparkpoint-heavy.lock"
# +snappy: compressed key groups; +thread: PyFlink's thread mode
BACKENDS = ("hashmap", "rocksdb", "hashmap+snappy", "hashmap+thread")
PROGRAMS = (
    "keyed_counts",
    "keyed_lists",
    "keyed_typed",
    "timer_buffer",
    "tumbling_window",
    "tumbling_aggregate",
)
# Programs on event time read ``key,item,timestamp`` lines, and run on these backends only.
TIMED = {
    "timer_buffer": ("hashmap", "rocksdb"),
    "tumbling_window": ("hashmap", "rocksdb"),
    "tumbling_aggregate": ("hashmap",),
}
KEYS = ("alice", "bob", "carol", "dave", "erin")
ITEMS = ("apple", "pear", "fig", "plum")


def first_half_lines() -> list[str]:
    """30 deterministic ``key,item,amount`` lines."""
    return [f"{KEYS[i * 7 % 5]},{ITEMS[i * 3 % 4]},{i % 9 + 1}" for i in range(30)]


def timed_lines() -> list[str]:
    """30 ``key,item,timestamp`` lines, a second apart: three ten-second buckets of every key."""
    return [f"{KEYS[i * 7 % 5]},{ITEMS[i * 3 % 4]},{i * 1000}" for i in range(30)]


def run(venv: Path, args: list[str], stdout_path: Path, cwd: Path, timeout: float) -> str:
    env = dict(os.environ)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONPATH", None)
    with open(stdout_path, "w") as out:
        proc = subprocess.run(
            [str(goldens.venv_python(venv)), *args],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            timeout=timeout,
            check=False,
        )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-30:])
        raise RuntimeError(f"{args}: PyFlink exited with {proc.returncode}\n{tail}")
    return stdout_path.read_text()


def record_program(venv: Path, name: str, backend: str, timeout: float) -> dict[str, object]:
    program = FIXTURES / f"{name}.py"
    dest = FIXTURES / name / backend.replace("+", "-")
    with tempfile.TemporaryDirectory(prefix="flink-savepoint-") as tmp:
        work = Path(tmp)
        lines = timed_lines() if name in TIMED else first_half_lines()
        (work / "in").mkdir()
        (work / "in" / "part-0.txt").write_text("\n".join(lines) + "\n")
        first_out = work / "first.out"
        run(
            venv,
            [
                str(program),
                "first",
                str(work / "in"),
                str(first_out),
                str(len(lines)),
                backend,
                f"file://{work / 'savepoints'}",
            ],
            first_out,
            work,
            timeout,
        )
        printed = first_out.read_text().splitlines()
        (where,) = [line.split(" ", 1)[1] for line in printed if line.startswith("SAVEPOINT ")]
        savepoint = Path(where.removeprefix("file:"))
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        shutil.copytree(savepoint, dest / "savepoint")
        second = run(
            venv,
            [str(program), "second", str(dest / "savepoint")]
            + (["thread"] if backend.endswith("+thread") else []),
            work / "second.out",
            work,
            timeout,
        )
    first_records = sorted(line for line in printed if " count=" in line)
    return {
        "input": lines,
        "first_half": first_records,
        "second_half": sorted(line for line in second.splitlines() if " count=" in line),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=goldens.DEFAULT_VENV)
    parser.add_argument("--pyflink-version", default=goldens.DEFAULT_VERSION)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    parser.add_argument("--backend", choices=BACKENDS, action="append")
    parser.add_argument("--program", choices=PROGRAMS, action="append")
    opts = parser.parse_args()
    goldens.ensure_venv(opts.venv, opts.pyflink_version)
    record_file = FIXTURES / "recorded.json"
    recorded = json.loads(record_file.read_text()) if record_file.exists() else {}
    recorded.update(
        {
            "pyflink_version": goldens.installed_version(opts.venv),
            "java": goldens.java_version(),
            "python": subprocess.run(
                [str(goldens.venv_python(opts.venv)), "--version"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip(),
        }
    )
    programs = recorded.setdefault("programs", {})
    lock = open(LOCK, "a")  # held until the process ends
    print(f"waiting for {LOCK}", flush=True)
    fcntl.flock(lock, fcntl.LOCK_EX)
    for name in opts.program or PROGRAMS:
        for backend in opts.backend or TIMED.get(name, BACKENDS):
            if backend not in TIMED.get(name, BACKENDS):
                continue
            result = record_program(opts.venv, name, backend, opts.timeout)
            programs[f"{name}/{backend}"] = result
            lines = len(result["second_half"])  # type: ignore[arg-type]
            print(f"recorded {name}/{backend}: {lines} lines", flush=True)
    record_file.write_text(json.dumps(recorded, indent=2) + "\n")


if __name__ == "__main__":
    main()
