"""``SPARKPOINT_TEST_EPOCH_MODE=long-running`` runs the runtime and Kafka tests that build
their environment through the shared helpers in that epoch mode (run by hand; CI runs the
default mode plus tests/runtime/test_long_running.py)."""

from __future__ import annotations

import os
from typing import Any


def apply_test_epoch_mode(conf: Any) -> None:
    """Set ``sparkpoint.epoch.mode`` on ``conf`` from the environment, if it names one."""
    mode = os.environ.get("SPARKPOINT_TEST_EPOCH_MODE")
    if mode:
        conf.set_string("sparkpoint.epoch.mode", mode)


def long_running() -> bool:
    """Whether the tests run in the long-running epoch mode."""
    return os.environ.get("SPARKPOINT_TEST_EPOCH_MODE") == "long-running"
