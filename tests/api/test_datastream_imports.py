"""Every module of ``sparkpoint.datastream`` imports alone, in a fresh interpreter (no import
cycle needs another module loaded first), and none resolves names lazily through a module
``__getattr__``."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import sparkpoint.datastream

_PREFIX = "sparkpoint.datastream."
MODULES = [
    "sparkpoint.datastream",
    *sorted(info.name for info in pkgutil.walk_packages(sparkpoint.datastream.__path__, _PREFIX)),
]

PROBE = """
import importlib, sys
name = sys.argv[1]
module = importlib.import_module(name)
assert "__getattr__" not in vars(module), f"{name} has a module-level __getattr__"
"""


@pytest.mark.parametrize("module", MODULES)
def test_a_datastream_module_imports_alone(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, module], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_the_package_exports_pyflinks_async_names() -> None:
    from sparkpoint.datastream import functions
    from sparkpoint.datastream.async_data_stream import AsyncDataStream

    assert sparkpoint.datastream.AsyncDataStream is AsyncDataStream
    for name in ("AsyncFunction", "AsyncRetryStrategy", "AsyncRetryStrategies"):
        assert getattr(functions, name) is getattr(sparkpoint.datastream, name)


@pytest.mark.parametrize(
    "module", ["async_data_stream", "broadcast_stream", "connected_streams", "windowed_stream"]
)
def test_satellite_streams_add_operators_only_through_derive(module: str) -> None:
    source = (Path(sparkpoint.datastream.__file__).parent / f"{module}.py").read_text()
    for private in ("._node", "._env", "_add_node(", "DataStream("):
        assert private not in source, f"{module} uses {private}"
    assert "._derive(" in source
