"""``sparkpoint run --pack-env``: the virtualenv the command runs in, packed with venv-pack
into a ``tar.gz`` for ``spark-submit --archives ...#environment`` (Spark's "Python Package
Management"; bench/bench_pack_env.py measured it against PEX, docs/benchmarks.md).

PySpark is left out: every executor's Python worker imports Spark's own ``pyspark.zip``
first, whatever the archive holds, so a packed copy would only add its jars. An editable
install is refused: its code stays in the source directory, which the archive does not
carry. The archive is cached, keyed by the environment's location, its installed
distributions (names and modification times) and the packing options, so an unchanged
environment is packed once.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PackedEnvironment", "pack_environment", "packed_environment_cache"]

# Left out of every archive (venv-pack patterns, relative to the environment's root).
EXCLUDED = (
    "lib/python*/site-packages/pyspark/*",
    "lib/python*/site-packages/pyspark-*.dist-info/*",
)
# gzip level 1: 8% larger than venv-pack's default 4, packed and unpacked twice as fast
# (bench/bench_pack_env.py, docs/benchmarks.md).
COMPRESS_LEVEL = 1


@dataclass(frozen=True)
class PackedEnvironment:
    """An archive of a virtualenv: where it is, how big, and whether it was packed now."""

    path: Path
    size: int
    packed_now: bool
    seconds: float


def packed_environment_cache() -> Path:
    """Where packed environments are kept: ``$SPARKPOINT_PACK_CACHE``, else
    ``$XDG_CACHE_HOME/sparkpoint/packed-envs`` (``~/.cache/...``)."""
    explicit = os.environ.get("SPARKPOINT_PACK_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "sparkpoint" / "packed-envs"


def _site_packages(prefix: Path) -> Path:
    relative = os.path.relpath(sysconfig.get_paths()["purelib"], sys.prefix)
    return prefix / relative


def _check_virtualenv(prefix: Path) -> None:
    if not (prefix / "pyvenv.cfg").is_file():
        raise ValueError(
            f"--pack-env packs the virtualenv sparkpoint runs in, and {prefix} is not one (no "
            "pyvenv.cfg): run `sparkpoint run` from a virtualenv with the job's packages "
            "(python -m venv ENV; ENV/bin/pip install sparkpoint[deploy] ...), or pass "
            "--archives with an environment packed otherwise"
        )


def _editable_installs(site_packages: Path) -> list[str]:
    """Distributions installed in editable mode (``direct_url.json``, PEP 610)."""
    found = []
    for direct_url in sorted(site_packages.glob("*.dist-info/direct_url.json")):
        try:
            info = json.loads(direct_url.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(info, dict) and (info.get("dir_info") or {}).get("editable"):
            found.append(f"{direct_url.parent.name.split('-')[0]} ({info.get('url', '?')})")
    return found


def _fingerprint(prefix: Path, site_packages: Path, python_prefix: str | None) -> str:
    digest = hashlib.sha256()
    digest.update(f"{prefix.resolve()}\0{python_prefix}\0{EXCLUDED}\0".encode())
    for entry in sorted(site_packages.iterdir()):
        stat = entry.stat()
        digest.update(f"{entry.name}\0{stat.st_mtime_ns}\0".encode())
        record = entry / "RECORD"
        if entry.name.endswith(".dist-info") and record.is_file():
            digest.update(f"{record.stat().st_mtime_ns}\0".encode())
    return digest.hexdigest()[:16]


def _venv_pack() -> Any:
    try:
        import venv_pack  # type: ignore[import-untyped]
    except ImportError:
        raise ValueError(
            "--pack-env needs venv-pack in the Python that runs sparkpoint: pip install "
            "'sparkpoint[deploy]' (or venv-pack)"
        ) from None
    return venv_pack


def pack_environment(
    prefix: str | None = None,
    python_prefix: str | None = None,
    cache: Path | None = None,
) -> PackedEnvironment:
    """The ``tar.gz`` of the virtualenv at ``prefix`` (default: the one running), from the
    cache when the environment did not change. ``python_prefix``: where the workers'
    Python is installed, when not where this one is (venv-pack's ``--python-prefix``)."""
    root = Path(prefix or sys.prefix)
    _check_virtualenv(root)
    site_packages = _site_packages(root)
    editable = _editable_installs(site_packages)
    if editable:
        raise ValueError(
            f"--pack-env cannot pack editable installs: {', '.join(editable)}; their code "
            "stays in their source directories, which the archive does not carry. Install "
            "them normally (pip install DIR, not -e) or ship them with --py-files"
        )
    venv_pack = _venv_pack()
    directory = cache or packed_environment_cache()
    directory.mkdir(parents=True, exist_ok=True)
    archive = directory / f"env-{_fingerprint(root, site_packages, python_prefix)}.tar.gz"
    if archive.is_file():
        return PackedEnvironment(archive, archive.stat().st_size, False, 0.0)
    start = time.monotonic()
    fd, tmp = tempfile.mkstemp(prefix=".packing-", suffix=".tar.gz", dir=directory)
    os.close(fd)
    try:
        venv_pack.pack(
            prefix=str(root),
            output=tmp,
            python_prefix=python_prefix,
            force=True,
            compress_level=COMPRESS_LEVEL,
            filters=[("exclude", pattern) for pattern in EXCLUDED],
        )
        os.replace(tmp, archive)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return PackedEnvironment(archive, archive.stat().st_size, True, time.monotonic() - start)
