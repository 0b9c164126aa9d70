"""The demo's terminal: a progress bar and event lines, with everything else in a log file.

Spark's JVM, its Python workers and Python's logging all write to the process's file
descriptors 1 and 2 (the JVM inherits them when PySpark starts it). ``TerminalLog`` points
both at a log file before Spark starts and keeps a private copy of the terminal for the
demo's own lines, so the stack traces of injected faults end up in the log, not on screen.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

__all__ = ["Progress", "TerminalLog"]

_BAR = 30


class TerminalLog:
    """Sends fds 1 and 2 to ``path`` until ``restore``; ``out`` writes to the terminal."""

    def __init__(self, path: str) -> None:
        self.path = path
        sys.stdout.flush()
        sys.stderr.flush()
        self._saved = (os.dup(1), os.dup(2))
        self.out: TextIO = os.fdopen(os.dup(1), "w", buffering=1)
        log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)

    def restore(self) -> None:
        """Give fds 1 and 2 back to the terminal (the JVM keeps writing to the log)."""
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, saved in zip((1, 2), self._saved):
            os.dup2(saved, fd)
            os.close(saved)
        self.out.flush()


class Progress:
    """A progress bar: redrawn in place on a terminal, a line per tenth otherwise."""

    def __init__(self, out: TextIO, total: int) -> None:
        self.out = out
        self.total = max(1, total)
        self.tty = out.isatty()
        self._drawn = 0  # width of the bar line on screen (tty)
        self._tenth = -1
        self._last = ""

    def _line(self, done: int, detail: str) -> str:
        share = min(1.0, done / self.total)
        filled = int(share * _BAR)
        bar = "#" * filled + "-" * (_BAR - filled)
        return f"[{bar}] {share:4.0%}  {min(done, self.total):,}/{self.total:,} records  {detail}"

    def update(self, done: int, detail: str) -> None:
        """Show ``done`` of the total, with ``detail`` (epoch, checkpoints, ...)."""
        line = self._line(done, detail)
        if self.tty:
            self.out.write("\r" + line.ljust(self._drawn))
            self.out.flush()
            self._drawn = len(line)
            return
        tenth = min(10, done * 10 // self.total)
        if tenth > self._tenth:
            self._tenth = tenth
            self._last = line
            self.out.write(line + "\n")

    def event(self, text: str) -> None:
        """A line of its own (a fault, a failover, a restore), above the bar."""
        if self.tty and self._drawn:
            self.out.write("\r" + " " * self._drawn + "\r")
            self._drawn = 0
        self.out.write(text + "\n")

    def finish(self, done: int, detail: str) -> None:
        """The final state of the bar, ending its line."""
        if self.tty:
            self.update(done, detail)
            self.out.write("\n")
            self._drawn = 0
        elif self._line(done, detail) != self._last:
            self._last = self._line(done, detail)
            self.out.write(self._last + "\n")
