"""Every module of ``sparkpoint.datastream`` imports alone, in an interpreter where no other
sparkpoint module is loaded (no import cycle needs another module loaded first), and none
resolves names lazily through a module ``__getattr__``.

One fresh interpreter serves every module: it loads the third-party packages the modules
import (top-level packages only: they take no part in sparkpoint's import cycles), then forks
a child a module, which imports just that module. A fresh subprocess a module took 37 s of
CPU for the 34 modules (57 s on a loaded machine); this takes 9 s with the suite's bytecode
cache (conftest).
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import sparkpoint.datastream

_PREFIX = "sparkpoint.datastream."
MODULES = [
    "sparkpoint.datastream",
    *sorted(info.name for info in pkgutil.walk_packages(sparkpoint.datastream.__path__, _PREFIX)),
]

# Reads module names from stdin, one a line; answers each with a JSON line: null (imported, no
# module __getattr__) or the error. Before the first, a child imports them all to learn the
# third-party top-level packages they load, and the server imports those.
SERVER = r"""
import importlib, json, os, sys, traceback

def probe(name):
    module = importlib.import_module(name)
    assert "__getattr__" not in vars(module), f"{name} has a module-level __getattr__"

def in_child(work):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            answer = work()
        except BaseException:
            answer = traceback.format_exc()
        with os.fdopen(write, "w") as out:
            json.dump(answer, out)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as inp:
        text = inp.read()
    os.waitpid(pid, 0)
    return json.loads(text) if text else "the child died without an answer"

def third_party():
    before = set(sys.modules)
    for name in sys.argv[1:]:
        importlib.import_module(name)
    tops = {m.split(".")[0] for m in set(sys.modules) - before}
    # Only real packages: C extensions register pseudo-modules (cython_runtime) too.
    return sorted(
        t for t in tops
        if t != "sparkpoint" and not t.startswith("_")
        and getattr(sys.modules.get(t), "__spec__", None)
    )

packages = in_child(third_party)
if isinstance(packages, str):
    print(json.dumps(packages), flush=True)
    sys.exit(1)
for package in packages:
    importlib.import_module(package)
assert not any(m.split(".")[0] == "sparkpoint" for m in sys.modules), "sparkpoint preloaded"
print(json.dumps(None), flush=True)
for line in sys.stdin:
    name = line.strip()
    print(json.dumps(in_child(lambda: probe(name))), flush=True)
"""


@pytest.fixture(scope="module")
def import_server() -> Iterator[subprocess.Popen[str]]:
    """The forking interpreter of ``SERVER`` (with the suite's bytecode cache: conftest)."""
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, *MODULES],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    assert json.loads(server.stdout.readline()) is None, "the import server did not start"
    yield server
    server.communicate(timeout=60)


@pytest.mark.parametrize("module", MODULES)
def test_a_datastream_module_imports_alone(
    import_server: subprocess.Popen[str], module: str
) -> None:
    assert import_server.stdin is not None and import_server.stdout is not None
    import_server.stdin.write(module + "\n")
    import_server.stdin.flush()
    error = json.loads(import_server.stdout.readline())
    assert error is None, error


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
