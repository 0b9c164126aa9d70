"""The exit codes of the ``sparkpoint`` command (docs/storage.md, "The sparkpoint command")."""

from __future__ import annotations

__all__ = ["EXIT_ERROR", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_NOT_FOUND", "EXIT_OK"]

EXIT_OK = 0
"""Done; ``list``, ``latest`` and ``history`` also when they skipped (and reported) an
unreadable snapshot."""

EXIT_NOT_FOUND = 1
"""``latest``: no complete, readable checkpoint under the directory."""

EXIT_ERROR = 2
"""Bad input: a usage error, a missing path, a ``_metadata`` that is not a regular file or
too large, corrupt or odd metadata, unreadable state. One line on stderr."""

EXIT_INTERNAL = 3
"""An error sparkpoint did not expect (a bug): one line on stderr; ``--debug`` shows the
traceback."""

EXIT_INTERRUPTED = 130
"""Interrupted (Ctrl-C)."""
