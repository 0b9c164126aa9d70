"""``sparkpoint run`` without Spark: the spark-submit call it builds, the configuration it
hands the job, the environment it packs, and what the driver reports back."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.cli.main import main
from sparkpoint.cli.pack_env import pack_environment
from sparkpoint.config.client import (
    CLIENT_CONFIGURATION_ENV,
    JOB_INFO_FILE_ENV,
    client_configuration,
)
from sparkpoint.datastream import StreamExecutionEnvironment
from sparkpoint.errors import ConfigurationError
from sparkpoint.runtime.driver.job_info import report_started_job


def _dry_run(capsys: Any, *args: str) -> tuple[dict[str, str], list[str]]:
    assert main(["run", "--dry-run", *args]) == 0
    lines = capsys.readouterr().out.splitlines()
    env = dict(line.split("=", 1) for line in lines[:-1])
    return {k: shlex.split(v)[0] for k, v in env.items()}, shlex.split(lines[-1])


def test_the_submission_carries_what_sparkpoint_needs(capsys: Any, tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text("")
    env, command = _dry_run(
        capsys,
        "--master",
        "spark://host:7077",
        "-s",
        str(tmp_path / "sp"),
        "-n",
        "-d",
        "--archives",
        "extra.zip,env.tar.gz#environment",
        "--py-files",
        "a.py,b.zip",
        "-D",
        "execution.checkpointing.interval=1s",
        "--conf",
        "spark.executor.memory=2g",
        str(job),
        "--flag",
        "x",
    )
    assert command[0].endswith("spark-submit")
    assert command[1:7] == [
        "--master",
        "spark://host:7077",
        "--deploy-mode",
        "client",
        "--name",
        "job",
    ]
    confs = {command[i + 1] for i, a in enumerate(command) if a == "--conf"}
    assert confs == {
        "spark.locality.wait.process=10s",
        "spark.speculation=false",
        "spark.python.worker.reuse=true",
        f"spark.pyspark.driver.python={sys.executable}",
        "spark.pyspark.python=./environment/bin/python",
        "spark.executor.memory=2g",
    }
    assert command[command.index("--archives") + 1] == "extra.zip,env.tar.gz#environment"
    assert (
        command[command.index("--py-files") + 1]
        == f"{os.path.abspath('a.py')},{os.path.abspath('b.zip')}"
    )
    assert command[-3:] == [str(job), "--flag", "x"]
    assert env["PYSPARK_PYTHON"] == "./environment/bin/python"
    assert json.loads(env[CLIENT_CONFIGURATION_ENV]) == {
        "execution.checkpointing.interval": "1s",
        "execution.state-recovery.path": str(tmp_path / "sp"),
        "execution.state-recovery.ignore-unclaimed-state": "true",
        "sparkpoint.dashboard.enabled": "true",
        "sparkpoint.rest.enabled": "true",
    }


def test_a_user_setting_wins_over_sparkpoints(capsys: Any, tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text("")
    env, command = _dry_run(
        capsys,
        "--conf",
        "spark.locality.wait.process=30s",
        "-D",
        "sparkpoint.dashboard.enabled=false",
        "-d",
        str(job),
    )
    assert "spark.locality.wait.process=30s" in command
    assert "spark.locality.wait.process=10s" not in command
    assert json.loads(env[CLIENT_CONFIGURATION_ENV]) == {
        "sparkpoint.dashboard.enabled": "false",
        "sparkpoint.rest.enabled": "true",
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-D", "execution.checkpointing.interval=soon"], "'execution.checkpointing.interval'"),
        (["-D", "novalue"], "-D 'novalue': expected KEY=VALUE"),
        (["--python-prefix", "/usr"], "--python-prefix applies to --pack-env only"),
    ],
)
def test_bad_arguments_are_refused_naming_them(
    capsys: Any, tmp_path: Path, args: list[str], message: str
) -> None:
    job = tmp_path / "job.py"
    job.write_text("")
    assert main(["run", *args, str(job)]) == 2
    assert message in capsys.readouterr().err


def test_a_missing_job_file_is_refused(capsys: Any, tmp_path: Path) -> None:
    assert main(["run", str(tmp_path / "nowhere.py")]) == 2
    assert "the job file" in capsys.readouterr().err


def test_the_environment_applies_the_clients_configuration(monkeypatch: Any) -> None:
    monkeypatch.setenv(
        CLIENT_CONFIGURATION_ENV,
        json.dumps(
            {"execution.state-recovery.path": "/tmp/sp-1", "execution.checkpointing.interval": "3s"}
        ),
    )
    env = StreamExecutionEnvironment.get_execution_environment()
    config = env._job_request().configuration
    assert config.get_string("execution.state-recovery.path", None) == "/tmp/sp-1"
    assert env.get_checkpoint_config().get_checkpoint_interval() == 3000


@pytest.mark.parametrize("raw", ["{", "[1]", '{"a": 1}'])
def test_a_malformed_client_configuration_is_refused(raw: str) -> None:
    with pytest.raises(ConfigurationError, match=CLIENT_CONFIGURATION_ENV):
        client_configuration({CLIENT_CONFIGURATION_ENV: raw})


def test_the_driver_reports_its_first_job_once(monkeypatch: Any, tmp_path: Path) -> None:
    info = tmp_path / "job.json"
    monkeypatch.setenv(JOB_INFO_FILE_ENV, str(info))
    report_started_job("a" * 32, "first", "http://127.0.0.1:1/")
    report_started_job("b" * 32, "second", None)
    record = json.loads(info.read_text())
    assert record["job_id"] == "a" * 32 and record["job_name"] == "first"
    assert record["dashboard_url"] == "http://127.0.0.1:1/"
    assert record["driver_pid"] == os.getpid()
    assert [p.name for p in tmp_path.iterdir()] == ["job.json"]


def _venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = venv.glob("lib/python*/site-packages")
    (site / "mine.py").write_text("X = 1\n")
    (site / "pyspark").mkdir()
    (site / "pyspark" / "__init__.py").write_text("")
    (site / "pyspark-4.3.0.dist-info").mkdir()
    (site / "pyspark-4.3.0.dist-info" / "RECORD").write_text("")
    return venv


def test_pack_leaves_pyspark_out_and_packs_once(tmp_path: Path) -> None:
    venv = _venv(tmp_path)
    first = pack_environment(str(venv), cache=tmp_path / "cache")
    assert first.packed_now
    with tarfile.open(first.path) as archive:
        names = archive.getnames()
    assert any(n.endswith("site-packages/mine.py") for n in names)
    assert "pyvenv.cfg" in names
    assert not [n for n in names if "pyspark" in n]
    again = pack_environment(str(venv), cache=tmp_path / "cache")
    assert again.path == first.path and not again.packed_now
    (next(venv.glob("lib/python*/site-packages")) / "other.py").write_text("")
    changed = pack_environment(str(venv), cache=tmp_path / "cache")
    assert changed.packed_now and changed.path != first.path


def test_pack_refuses_editable_installs_and_non_virtualenvs(tmp_path: Path) -> None:
    venv = _venv(tmp_path)
    dist = next(venv.glob("lib/python*/site-packages")) / "mylib-1.0.dist-info"
    dist.mkdir()
    (dist / "direct_url.json").write_text(
        json.dumps({"url": "file:///src/mylib", "dir_info": {"editable": True}})
    )
    with pytest.raises(ValueError, match=r"editable installs: mylib \(file:///src/mylib\)"):
        pack_environment(str(venv), cache=tmp_path / "cache")
    with pytest.raises(ValueError, match="is not one"):
        pack_environment(str(tmp_path), cache=tmp_path / "cache")
