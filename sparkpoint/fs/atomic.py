"""Checkpoint storage needs atomic no-overwrite creates; this refuses file systems without them.

Exactly-once rests on each checkpoint file being created once: a retried task, or a zombie
driver next to its replacement, must not both believe they wrote ``_metadata`` or a state
file. A file system that checks for a file and then writes it lets both succeed, the later
one silently replacing the other. Such file systems are refused unless the user accepts the
race with ``sparkpoint.fs.allow-non-atomic-create: true``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from sparkpoint.config.filesystem import FileSystemOptions
from sparkpoint.errors import SparkpointError
from sparkpoint.fs.base import FileSystem
from sparkpoint.fs.registry import get_options

__all__ = ["ALLOW_NON_ATOMIC_CREATE", "NonAtomicCreateError", "require_atomic_create"]

ALLOW_NON_ATOMIC_CREATE = FileSystemOptions.ALLOW_NON_ATOMIC_CREATE.key

_LOG = logging.getLogger(__name__)
_warned: set[str] = set()


class NonAtomicCreateError(SparkpointError, ValueError):
    """Checkpoint storage was pointed at a file system that cannot create files atomically."""


def _allowed(options: Mapping[str, str]) -> bool:
    return FileSystemOptions.ALLOW_NON_ATOMIC_CREATE.read(options)


def require_atomic_create(
    fs: FileSystem, path: str, options: Mapping[str, str] | None = None
) -> None:
    """Raise ``NonAtomicCreateError`` unless ``fs`` creates atomically or the user opted in.

    ``options`` defaults to the process-wide ``sparkpoint.fs.configure`` options.
    """
    if fs.atomic_create:
        return
    if _allowed(get_options() if options is None else options):
        if fs.scheme not in _warned:
            _warned.add(fs.scheme)
            _LOG.warning(
                "Checkpoint storage on %s:// creates files by checking, then writing (%s); "
                "two writers of one file may both succeed (%s=true).",
                fs.scheme,
                fs.non_atomic_reason,
                ALLOW_NON_ATOMIC_CREATE,
            )
        return
    raise NonAtomicCreateError(
        f"Checkpoint storage '{path}' is refused: the {fs.scheme}:// file system cannot create "
        f"a file atomically ({fs.non_atomic_reason}). Without that, a retried task or a zombie "
        "driver and its replacement can both write the same checkpoint file, and one silently "
        f"replaces the other. Fix: use a file system that can (see docs/storage.md), or accept "
        f"the race with sparkpoint.fs.configure({{'{ALLOW_NON_ATOMIC_CREATE}': 'true'}})."
    )
