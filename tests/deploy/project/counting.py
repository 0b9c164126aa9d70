"""The user's own module of the deploy tests' job: shipped to executors with --py-files
(bare workers have no copy of it)."""

from __future__ import annotations

import time


def parse(line: str) -> tuple[str, int]:
    """``"key,value"`` -> ``(key, value)``, after ~1 ms of work: the deploy test's input
    then takes seconds to read in any epoch mode, so a stop lands in the middle of it."""
    time.sleep(0.001)
    key, value = line.split(",")
    return key, int(value)


def add(a: tuple[str, int], b: tuple[str, int]) -> tuple[str, int]:
    """The running sum of one key."""
    return a[0], a[1] + b[1]


def show(pair: tuple[str, int]) -> str:
    return f"{pair[0]},{pair[1]}"
