"""The import rules of docs/architecture.md ("Layers"), checked on the source of every module.

Every import counts, also those inside functions: a lower layer that imports a higher one
late still depends on it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "sparkpoint"

# package (dotted, below ``sparkpoint``) -> prefixes it must never import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "config": ("pyspark", "sparkpoint."),  # only sparkpoint.errors, allowed below
    "fs": (
        "pyspark",
        "sparkpoint.runtime",
        "sparkpoint.datastream",
        "sparkpoint.state",
        "sparkpoint.checkpoint",
        "sparkpoint.connectors",
        "sparkpoint.state_processor",
        "sparkpoint.cli",
    ),
    "checkpoint": (
        "pyspark",
        "sparkpoint.runtime",
        "sparkpoint.datastream",
        "sparkpoint.state",
        "sparkpoint.connectors",
        "sparkpoint.state_processor",
        "sparkpoint.cli",
    ),
    "state": (
        "pyspark",
        "sparkpoint.runtime",
        "sparkpoint.datastream",
        "sparkpoint.connectors",
        "sparkpoint.state_processor",
        "sparkpoint.cli",
    ),
    "metrics": (
        "pyspark",
        "sparkpoint.runtime",
        "sparkpoint.datastream",
        "sparkpoint.state",
        "sparkpoint.checkpoint",
        "sparkpoint.connectors",
        "sparkpoint.state_processor",
        "sparkpoint.cli",
    ),
    "runtime.operators": (
        "sparkpoint.runtime.task",
        "sparkpoint.runtime.spark",
        "sparkpoint.runtime.driver",
        "sparkpoint.runtime.dashboard",
        "sparkpoint.runtime.rest",
    ),
    "runtime.task": (
        "sparkpoint.runtime.spark",
        "sparkpoint.runtime.driver",
        "sparkpoint.runtime.dashboard",
        "sparkpoint.runtime.rest",
    ),
    "runtime.spark": (
        "sparkpoint.runtime.driver",
        "sparkpoint.runtime.dashboard",
        "sparkpoint.runtime.rest",
    ),
    # The driver is served by the packages above it and imports none of them (issue 40:
    # its settings imported the dashboard while the dashboard read the driver's progress).
    "runtime.driver": ("sparkpoint.runtime.dashboard", "sparkpoint.runtime.rest"),
    "runtime.dashboard": ("sparkpoint.runtime.rest",),
    "runtime.serving": (
        "pyspark",
        "sparkpoint.runtime.operators",
        "sparkpoint.runtime.task",
        "sparkpoint.runtime.spark",
        "sparkpoint.runtime.driver",
        "sparkpoint.runtime.dashboard",
        "sparkpoint.runtime.rest",
    ),
    # the Flink savepoint importer: pure Python (the state processor's Spark-free core only)
    "state_processor.flink": (
        "pyspark",
        "sparkpoint.runtime",
        "sparkpoint.datastream",
        "sparkpoint.connectors",
        "sparkpoint.cli",
        "sparkpoint.state_processor.reader",
        "sparkpoint.state_processor.writer",
        "sparkpoint.state_processor.spark_support",
    ),
}
ALLOWED = {"config": ("sparkpoint.errors", "sparkpoint.config")}


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _matches(name: str, prefix: str) -> bool:
    return name == prefix.rstrip(".") or name.startswith(prefix.rstrip(".") + ".")


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_package_imports_nothing_above_it(package: str) -> None:
    directory = ROOT.joinpath(*package.split("."))
    files = sorted(directory.rglob("*.py"))
    assert files, f"no modules under {directory}"
    broken = []
    for path in files:
        for name in _imports(path):
            if any(_matches(name, allowed) for allowed in ALLOWED.get(package, ())):
                continue
            if any(_matches(name, prefix) for prefix in FORBIDDEN[package]):
                broken.append(f"{path.relative_to(ROOT.parent)} imports {name}")
    assert not broken, "\n".join(broken)


def test_the_runtime_top_holds_only_the_plan_and_the_protocol() -> None:
    top = {p.name for p in (ROOT / "runtime").glob("*.py")}
    assert top == {"__init__.py", "graph.py", "protocol.py"}


def test_every_package_has_an_init_with_a_docstring() -> None:
    missing = []
    for directory in [ROOT, *(p for p in ROOT.rglob("*") if p.is_dir())]:
        if directory.name == "__pycache__" or not any(directory.glob("*.py")):
            continue
        init = directory / "__init__.py"
        if not init.exists() or ast.get_docstring(ast.parse(init.read_text())) is None:
            missing.append(str(directory.relative_to(ROOT.parent)))
    assert not missing, missing
