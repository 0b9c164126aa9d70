"""The jobs directory: one file per job served with the REST API, ``<job id>.json`` with the
job's REST address and token, so the ``sparkpoint`` command on the driver's host finds the
job and may change it (``sparkpoint list``, ``stop``, ``cancel``, ``savepoint``).

The token lets whoever reads it stop or cancel the job, so the directory is used only when
it is a real directory of this user with mode 0700 (created so), and each file is written
with mode 0600 (to a temporary name, then renamed). Standard library only: the command
line reads these files without importing the runtime.
"""

from __future__ import annotations

import json
import os
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path

from sparkpoint.errors import SparkpointError
from sparkpoint.private_files import read_own_json

__all__ = [
    "JOBS_DIR_ENV",
    "JobFile",
    "default_jobs_dir",
    "read_job_files",
    "remove_job_file",
    "write_job_file",
]

JOBS_DIR_ENV = "SPARKPOINT_JOBS_DIR"
_MAX_FILE = 4096  # bytes: one short JSON object


@dataclass(frozen=True)
class JobFile:
    """Where one job's REST API is served, and its token."""

    job_id: str
    job_name: str
    url: str
    token: str
    path: str

    def to_json(self) -> dict[str, str]:
        return {
            "job_id": self.job_id,
            "job_name": self.job_name,
            "url": self.url,
            "token": self.token,
        }


def default_jobs_dir(configured: str | None = None) -> Path:
    """``configured`` (``sparkpoint.rest.jobs-dir``), else ``$SPARKPOINT_JOBS_DIR``, else
    ``~/.sparkpoint/jobs``."""
    chosen = configured or os.environ.get(JOBS_DIR_ENV) or "~/.sparkpoint/jobs"
    return Path(chosen).expanduser()


def _check_private(directory: Path) -> None:
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise SparkpointError(
            f"The jobs directory {directory} must be a directory of uid {os.geteuid()} that "
            f"only its owner can use (it is uid {st.st_uid}, "
            f"{'a symlink' if stat.S_ISLNK(st.st_mode) else stat.filemode(st.st_mode)}): "
            f"it holds the tokens that stop jobs; run 'chmod 700 {directory}' or set "
            f"sparkpoint.rest.jobs-dir / ${JOBS_DIR_ENV} to another directory"
        )


def write_job_file(directory: Path, job: JobFile) -> Path:
    """Write ``job`` to ``<directory>/<job id>.json`` (mode 0600; the directory is created
    with mode 0700, or must already be a private directory of this user)."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    try:
        directory.mkdir(mode=0o700)
    except FileExistsError:
        pass
    _check_private(directory)
    path = directory / f"{job.job_id}.json"
    tmp = directory / f".{job.job_id}.{uuid.uuid4().hex}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(job.to_json(), f)
    os.replace(tmp, path)
    return path


def remove_job_file(path: Path) -> None:
    """Remove a job's file (the job ended); a file already gone is fine."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def _read(directory_fd: int, name: str) -> JobFile | None:
    """The job file ``name`` if it is a regular file of this user holding a job, else None."""
    data = read_own_json(directory_fd, name, _MAX_FILE)
    try:
        job_id, job_name, url, token = (data[k] for k in ("job_id", "job_name", "url", "token"))
    except (KeyError, TypeError):
        return None
    if not all(isinstance(v, str) for v in (job_id, job_name, url, token)):
        return None
    return JobFile(job_id, job_name, url, token, path=name)


def read_job_files(directory: Path) -> list[JobFile]:
    """Every job file in ``directory`` (none when it does not exist), by job id; raises
    ``SparkpointError`` when the directory is not a private directory of this user."""
    if not os.path.lexists(directory):
        return []
    _check_private(directory)
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        names = sorted(n for n in os.listdir(dir_fd) if n.endswith(".json"))
        found = [_read(dir_fd, name) for name in names]
    finally:
        os.close(dir_fd)
    return [
        JobFile(f.job_id, f.job_name, f.url, f.token, str(directory / f.path))
        for f in found
        if f is not None
    ]
