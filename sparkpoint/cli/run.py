"""``sparkpoint run``: submit a job with spark-submit in Flink's habits (``flink run``).

    sparkpoint run [--master M] [-s SAVEPOINT] [-n] [-d] [--pack-env | --archives A]
                   [--py-files F] [-D KEY=VALUE] [--conf SPARK_KEY=VALUE] job.py [args]

The command builds the spark-submit call in client deploy mode (a standalone cluster runs
Python drivers in client mode only): the settings sparkpoint needs (``SUBMITTED_CONF``:
locality wait, speculation off), the driver's Python (this one), the executors' Python
from the packed environment (``--pack-env``: this virtualenv, packed with venv-pack; or
``--archives X#environment``), the user's modules (``--py-files``). The job learns the
restore path (``-s``), ``-n`` and every ``-D`` key through ``SPARKPOINT_CLIENT_CONFIGURATION``,
which its ``StreamExecutionEnvironment.get_execution_environment()`` applies. ``-d``
starts spark-submit in the background with the job's dashboard and REST API on (for
``sparkpoint list/stop/cancel/savepoint``), waits for the driver to report the job it
started (``SPARKPOINT_JOB_INFO_FILE``) and prints its id and dashboard URL.
docs/deploying.md has the whole path from a project directory to a running job.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkpoint.cli.text import printable, report
from sparkpoint.config.client import (
    CLIENT_CONFIGURATION_ENV,
    JOB_INFO_FILE_ENV,
    encode_client_configuration,
)

__all__ = ["Submission", "add_arguments", "build_submission", "run_command"]

ENVIRONMENT = "environment"  # the name an archive is unpacked under (``#environment``)
_EXECUTOR_PYTHON = f"./{ENVIRONMENT}/bin/python"
_RESTORE_PATH = "execution.state-recovery.path"
_IGNORE_UNCLAIMED = "execution.state-recovery.ignore-unclaimed-state"
_DASHBOARD = "sparkpoint.dashboard.enabled"
_REST = "sparkpoint.rest.enabled"
_POLL_S = 0.2


@dataclass
class Submission:
    """A spark-submit call: the command and the environment variables sparkpoint adds."""

    command: list[str]
    env: dict[str, str] = field(default_factory=dict)


def add_arguments(commands: Any) -> None:
    """Register ``run`` on the ``sparkpoint`` command's subparsers."""
    run = commands.add_parser(
        "run",
        help="submit a job with spark-submit (as `flink run`)",
        description=(
            "Submit a sparkpoint job (a Python file) to Spark with spark-submit, in client "
            "deploy mode. docs/deploying.md describes it."
        ),
    )
    run.add_argument("--master", "-m", help="Spark master URL (default: spark-submit's)")
    run.add_argument(
        "-s",
        "--from-savepoint",
        dest="savepoint",
        metavar="SAVEPOINT",
        help="start the job from this savepoint or retained checkpoint",
    )
    run.add_argument(
        "-n",
        "--allow-non-restored-state",
        action="store_true",
        help="allow skipping savepoint state of operators the job no longer has",
    )
    run.add_argument(
        "-d",
        "--detached",
        action="store_true",
        help="return once the job runs: print its id and dashboard URL",
    )
    shipped = run.add_mutually_exclusive_group()
    shipped.add_argument(
        "--pack-env",
        action="store_true",
        help="pack the virtualenv sparkpoint runs in (venv-pack) and ship it to executors",
    )
    shipped.add_argument(
        "--archives",
        action="append",
        default=[],
        metavar="ARCHIVE",
        help="archives for spark-submit --archives; one named #environment is the "
        "executors' Python (./environment/bin/python)",
    )
    run.add_argument(
        "--python-prefix",
        help="with --pack-env: where the workers' Python is installed, if not where this "
        "one is (venv-pack --python-prefix)",
    )
    run.add_argument(
        "--py-files",
        action="append",
        default=[],
        metavar="FILES",
        help="the job's own modules (.py, .zip) for spark-submit --py-files",
    )
    run.add_argument(
        "-D",
        dest="dynamic",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a configuration key for the job (as flink run -D)",
    )
    run.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark configuration key for spark-submit",
    )
    run.add_argument("--name", help="the Spark application's name (default: the file's)")
    run.add_argument("--spark-submit", help="spark-submit to run (default: $SPARK_HOME's)")
    run.add_argument("--log-dir", help="-d: where spark-submit's output goes (default: the cache)")
    run.add_argument(
        "--startup-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="-d: how long to wait for the job to start",
    )
    run.add_argument(
        "--dry-run", action="store_true", help="print the spark-submit call, run nothing"
    )
    run.add_argument("job", help="the job's Python file")
    run.add_argument("args", nargs=argparse.REMAINDER, help="the job's arguments")
    run.set_defaults(handler=run_command)


def _pairs(values: list[str], option: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{option} {value!r}: expected KEY=VALUE")
        pairs[key.strip()] = rest
    return pairs


def _spark_submit(explicit: str | None) -> str:
    """spark-submit: the one given, else $SPARK_HOME's, else PySpark's, else on PATH."""
    if explicit:
        return explicit
    candidates = []
    if os.environ.get("SPARK_HOME"):
        candidates.append(Path(os.environ["SPARK_HOME"]) / "bin" / "spark-submit")
    spec = importlib.util.find_spec("pyspark")
    if spec is not None and spec.submodule_search_locations:
        package = Path(next(iter(spec.submodule_search_locations)))
        candidates.append(package / "bin" / "spark-submit")
    for candidate in candidates:
        if os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("spark-submit")
    if found:
        return found
    raise ValueError(
        "spark-submit not found: set SPARK_HOME to a Spark installation, install pyspark, "
        "or pass --spark-submit"
    )


def _absolute(path: str) -> str:
    """A local path made absolute (the driver may run elsewhere); URIs as they are."""
    return path if "://" in path else os.path.abspath(path)


def client_configuration_of(args: argparse.Namespace) -> dict[str, str]:
    """The Flink configuration the job gets: ``-D`` keys, ``-s``, ``-n``, and in detached
    mode the dashboard and the REST API (how the job is watched, and stopped with
    ``sparkpoint stop``), checked now."""
    config = _pairs(args.dynamic, "-D")
    if args.savepoint:
        config[_RESTORE_PATH] = _absolute(args.savepoint)
    if args.allow_non_restored_state:
        config[_IGNORE_UNCLAIMED] = "true"
    if args.detached:
        config.setdefault(_DASHBOARD, "true")
        config.setdefault(_REST, "true")
    from sparkpoint.runtime.driver.settings import check_configuration

    check_configuration(config)
    return config


def build_submission(args: argparse.Namespace, archive: str | None) -> Submission:
    """The spark-submit call for ``args``; ``archive``: the packed environment, if any."""
    from sparkpoint.runtime.spark.session import SUBMITTED_CONF

    job = Path(args.job)
    if not job.is_file():
        raise ValueError(f"the job file {args.job!r} does not exist")
    spark_conf = _pairs(args.conf, "--conf")
    given = [a for value in args.archives for a in value.split(",") if a]
    archives = [f"{archive}#{ENVIRONMENT}"] if archive else given
    if any(a.endswith(f"#{ENVIRONMENT}") for a in archives):
        spark_conf.setdefault("spark.pyspark.python", _EXECUTOR_PYTHON)
    spark_conf.setdefault("spark.pyspark.driver.python", sys.executable)
    for key, value in SUBMITTED_CONF.items():
        spark_conf.setdefault(key, value)
    command = [_spark_submit(args.spark_submit)]
    if args.master:
        command += ["--master", args.master]
    command += ["--deploy-mode", "client", "--name", args.name or job.stem]
    for key, value in sorted(spark_conf.items()):
        command += ["--conf", f"{key}={value}"]
    if archives:
        command += ["--archives", ",".join(archives)]
    py_files = [_absolute(f) for value in args.py_files for f in value.split(",") if f]
    if py_files:
        command += ["--py-files", ",".join(py_files)]
    command += [str(job), *args.args]
    env = {
        "PYSPARK_DRIVER_PYTHON": spark_conf["spark.pyspark.driver.python"],
        CLIENT_CONFIGURATION_ENV: encode_client_configuration(client_configuration_of(args)),
    }
    if "spark.pyspark.python" in spark_conf:
        env["PYSPARK_PYTHON"] = spark_conf["spark.pyspark.python"]
    return Submission(command, env)


def _pack(args: argparse.Namespace) -> str | None:
    if not args.pack_env:
        if args.python_prefix:
            raise ValueError("--python-prefix applies to --pack-env only")
        return None
    from sparkpoint.cli.pack_env import pack_environment

    packed = pack_environment(python_prefix=args.python_prefix)
    how = f"packed in {packed.seconds:.1f} s" if packed.packed_now else "unchanged, reused"
    report(f"Environment {sys.prefix}: {packed.path} ({packed.size / 2**20:.0f} MiB, {how})")
    return str(packed.path)


def _run_dir(args: argparse.Namespace, name: str) -> Path:
    base = Path(args.log_dir) if args.log_dir else _default_log_dir()
    directory = base / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    directory.mkdir(parents=True, exist_ok=False)
    return directory


def _default_log_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "sparkpoint" / "runs"


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def _wait_for_job(proc: subprocess.Popen[bytes], info: Path, log: Path, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while not info.is_file():
        code = proc.poll()
        if code is not None:
            raise ValueError(
                f"spark-submit exited ({code}) before the job started; its log {log} ends:\n"
                + printable(_tail(log))
            )
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGTERM)
            raise ValueError(
                f"no job started within {timeout:g} s (--startup-timeout); spark-submit was "
                f"stopped; its log {log} ends:\n" + printable(_tail(log))
            )
        time.sleep(_POLL_S)
    return json.loads(info.read_text())


def _detached(submission: Submission, args: argparse.Namespace, name: str) -> int:
    run_dir = _run_dir(args, name)
    log, info = run_dir / "spark-submit.log", run_dir / "job.json"
    env = dict(os.environ, **submission.env, **{JOB_INFO_FILE_ENV: str(info)})
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            submission.command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives this command
        )
    job = _wait_for_job(proc, info, log, args.startup_timeout)
    print(f"Job has been submitted with JobID {printable(job['job_id'])}")
    if job.get("dashboard_url"):
        print(f"Dashboard: {printable(job['dashboard_url'])}")
    print(
        f"Spark application {printable(job.get('spark_application_id'))}, driver pid "
        f"{proc.pid}, log {log}"
    )
    return 0


def run_command(args: argparse.Namespace) -> int:
    """``sparkpoint run``: submit the job; attached, return spark-submit's exit code."""
    if args.dry_run:
        submission = build_submission(args, "<packed environment>" if args.pack_env else None)
        for key, value in sorted(submission.env.items()):
            print(f"{key}={shlex.quote(value)}")
        print(shlex.join(submission.command))
        return 0
    if not Path(args.job).is_file():
        raise ValueError(f"the job file {args.job!r} does not exist")
    client_configuration_of(args)  # a bad -D or -s fails before any packing
    submission = build_submission(args, _pack(args))
    name = args.name or Path(args.job).stem
    if args.detached:
        return _detached(submission, args, name)
    return subprocess.run(submission.command, env=dict(os.environ, **submission.env)).returncode
