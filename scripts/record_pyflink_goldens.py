"""Record the differential corpus's golden outputs with real PyFlink.

Creates (or reuses) a virtualenv outside the repository with ``apache-flink`` from PyPI (it
pins an older pyarrow, so it never goes into the project's environment), copies PyFlink's own
example programs from the installed package into ``tests/differential/pyflink_examples/``,
runs every corpus program with PyFlink, one at a time, holding the shared heavy-job lock for
the whole recording (a JVM per program; other heavy jobs wait), and writes each program's
standard output to ``tests/differential/goldens/``. The PyFlink, Java and Python versions,
and a hash of each program, go to ``goldens/recorded.json``.

    python scripts/record_pyflink_goldens.py                 # everything
    python scripts/record_pyflink_goldens.py w01_tumbling_reduce a25_async_ordered
    python scripts/record_pyflink_goldens.py --check         # re-run, compare as the tests do
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.differential import runner  # noqa: E402 - the manifest's reader and paths

GOLDENS = runner.GOLDENS
LOCK = "/tmp/sparkpoint-heavy.lock"
DEFAULT_VENV = Path(
    os.environ.get("SPARKPOINT_PYFLINK_VENV", "~/.cache/sparkpoint/pyflink-venv")
).expanduser()
DEFAULT_VERSION = "2.3.0"
# The PyFlink examples the corpus runs, as they sit in the installed package.
EXAMPLES = {
    "basic_operations": "examples/datastream/basic_operations.py",
    "state_access": "examples/datastream/state_access.py",
    "event_time_timer": "examples/datastream/event_time_timer.py",
    "process_json_data": "examples/datastream/process_json_data.py",
    "word_count": "examples/datastream/word_count.py",
    "tumbling_time_window": "examples/datastream/windowing/tumbling_time_window.py",
    "sliding_time_window": "examples/datastream/windowing/sliding_time_window.py",
    "session_with_gap_window": "examples/datastream/windowing/session_with_gap_window.py",
    "session_with_dynamic_gap_window": (
        "examples/datastream/windowing/session_with_dynamic_gap_window.py"
    ),
    "tumbling_count_window": "examples/datastream/windowing/tumbling_count_window.py",
}


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def installed_version(venv: Path) -> str | None:
    """The apache-flink version installed in ``venv``, or None."""
    if not venv_python(venv).exists():
        return None
    probe = subprocess.run(
        [
            str(venv_python(venv)),
            "-c",
            "import importlib.metadata as m; print(m.version('apache-flink'))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def ensure_venv(venv: Path, version: str) -> None:
    """Create ``venv`` with apache-flink ``version`` unless it already has it."""
    if installed_version(venv) == version:
        return
    if not venv_python(venv).exists():
        print(f"creating {venv}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    print(f"installing apache-flink=={version} into {venv}", flush=True)
    subprocess.run(
        [str(venv_python(venv)), "-m", "pip", "install", "-q", f"apache-flink=={version}"],
        check=True,
    )
    found = installed_version(venv)
    if found != version:
        raise SystemExit(f"{venv}: apache-flink {found!r} installed, wanted {version}")


def pyflink_dir(venv: Path) -> Path:
    out = subprocess.run(
        [
            str(venv_python(venv)),
            "-c",
            "import os, pyflink; print(os.path.dirname(pyflink.__file__))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def copy_examples(venv: Path) -> None:
    """Copy PyFlink's example programs, unchanged (license headers included)."""
    src = pyflink_dir(venv)
    dest = runner.SECTIONS["examples"]
    dest.mkdir(exist_ok=True)
    for name, rel in EXAMPLES.items():
        shutil.copyfile(src / rel, dest / f"{name}.py")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_one(venv: Path, path: Path, args: list[str], timeout: float) -> tuple[str, float]:
    """Run one program with PyFlink (the caller holds the lock); its stdout and seconds taken.
    Raises RuntimeError with the end of its stderr when it fails."""
    env = dict(os.environ)
    # PyFlink starts its Python workers with the ``python`` found on PATH.
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"  # keep client-side print()s in order with the JVM's output
    env.pop("PYTHONPATH", None)
    with tempfile.TemporaryDirectory(prefix="pyflink-golden-") as work:
        start = time.monotonic()
        proc = subprocess.run(
            [str(venv_python(venv)), str(path), *args],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        seconds = time.monotonic() - start
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-30:])
        raise RuntimeError(f"{path.name}: PyFlink exited with {proc.returncode}\n{tail}")
    return proc.stdout, seconds


def java_version() -> str:
    out = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    return out.stderr.splitlines()[0] if out.stderr else "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="programs to record (default: all)")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--pyflink-version", default=DEFAULT_VERSION)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per program")
    parser.add_argument(
        "--check",
        action="store_true",
        help="re-run and compare with the committed goldens; write nothing",
    )
    opts = parser.parse_args()

    ensure_venv(opts.venv, opts.pyflink_version)
    if not opts.check:
        copy_examples(opts.venv)
    manifest = runner.load_manifest()
    wanted = set(opts.names)
    entries = [e for e in manifest if not wanted or e.name in wanted]
    unknown = wanted - {e.name for e in entries}
    if unknown:
        raise SystemExit(f"not in manifest.toml: {', '.join(sorted(unknown))}")

    record_file = GOLDENS / "recorded.json"
    recorded = json.loads(record_file.read_text()) if record_file.exists() else {}
    recorded.update(
        {
            "pyflink_version": installed_version(opts.venv),
            "java": java_version(),
            "python": subprocess.run(
                [str(venv_python(opts.venv)), "--version"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip(),
        }
    )
    programs = recorded.setdefault("programs", {})
    mismatches: list[str] = []
    failures: list[str] = []
    total = 0.0
    lock = open(LOCK, "a")  # held until the process ends
    print(f"waiting for {LOCK}", flush=True)
    fcntl.flock(lock, fcntl.LOCK_EX)
    for e in entries:
        try:
            stdout, seconds = run_one(opts.venv, e.path, list(e.args), opts.timeout)
        except (RuntimeError, subprocess.TimeoutExpired) as err:
            print(f"FAILED {e.id}: {err}", flush=True)
            failures.append(e.id)
            continue
        total += seconds
        if opts.check:
            # Compared as the tests compare: line order only where the manifest says.
            golden = e.golden.read_text() if e.golden.exists() else ""
            problems = runner.differences(
                runner.normalise(golden, e.strip_prefix, e.ignore_lines),
                runner.normalise(stdout, e.strip_prefix, e.ignore_lines),
                e.order,
            )
            print(f"{'DIFFERENT' if problems else 'same'} {e.id} {seconds:.1f}s", flush=True)
            if problems:
                print("\n".join(problems), flush=True)
                mismatches.append(e.id)
            continue
        e.golden.parent.mkdir(parents=True, exist_ok=True)
        e.golden.write_text(stdout)
        programs[e.id] = {"sha256": sha256(e.path), "seconds": round(seconds, 1)}
        print(f"recorded {e.id}: {len(stdout.splitlines())} lines, {seconds:.1f}s", flush=True)
    print(f"{len(entries)} programs, {total:.0f}s with PyFlink", flush=True)
    if not opts.check:
        # Forget programs no longer in the manifest (renamed or removed).
        known = {e.id for e in manifest}
        recorded["programs"] = {k: v for k, v in sorted(programs.items()) if k in known}
        record_file.write_text(json.dumps(recorded, indent=2) + "\n")
    if failures:
        raise SystemExit(f"failed with PyFlink: {', '.join(failures)}")
    if opts.check:
        if mismatches:
            raise SystemExit(f"outputs differ from the goldens: {', '.join(mismatches)}")
        return


if __name__ == "__main__":
    main()
