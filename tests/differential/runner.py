"""Run a corpus program on sparkpoint and compare its output with PyFlink's golden.

A program runs as PyFlink would run it as a script (``__name__ == "__main__"``, ``sys.argv``
from the manifest), with only its import prefix rewritten from ``pyflink`` to ``sparkpoint``,
in this process: its environment finds the SparkSession the tests already started, and
what it prints (the driver prints ``print()`` sinks) is captured.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.toml"
GOLDENS = HERE / "goldens"
SECTIONS = {"programs": HERE / "programs", "examples": HERE / "pyflink_examples"}
ORDERS = ("exact", "per_sink", "unordered")
PENDING = ("issue 11", "issue 12")
ISSUES = ("11", "12", "29", "31", "examples")

_IMPORT = re.compile(r"^(\s*(?:from|import)\s+)pyflink(?=[.\s])", re.MULTILINE)
# PrintSinkOutputWriter's prefix: "id:N> ", "N> " or "id> " (id has no blanks or ':').
_PREFIX = re.compile(r"^(?:(?P<only>\d+)|(?P<id>[^\s:>]+)(?::(?P<sub>\d+))?)> ")


@dataclass(frozen=True)
class Entry:
    """One program of the manifest and how its output is compared."""

    section: str
    name: str
    issue: str
    order: str
    strip_prefix: bool = False
    pending: str | None = None
    reason: str = ""
    args: tuple[str, ...] = ()
    ignore_lines: tuple[str, ...] = ()
    why: str = ""

    @property
    def id(self) -> str:
        return f"{self.section}/{self.name}"

    @property
    def path(self) -> Path:
        return SECTIONS[self.section] / f"{self.name}.py"

    @property
    def golden(self) -> Path:
        return GOLDENS / self.section / f"{self.name}.out"


def load_manifest() -> list[Entry]:
    """Every manifest entry, checked for known keys and values."""
    with open(MANIFEST, "rb") as f:
        raw = tomllib.load(f)
    unknown_sections = set(raw) - set(SECTIONS)
    if unknown_sections:
        raise ValueError(f"manifest.toml: unknown sections {sorted(unknown_sections)}")
    entries = []
    for section, programs in raw.items():
        for name, spec in programs.items():
            spec = dict(spec)
            where = f"manifest.toml [{section}.{name}]"
            order = spec.pop("order", "exact")
            if order not in ORDERS:
                raise ValueError(f"{where}: order = {order!r}, allowed: {', '.join(ORDERS)}")
            pending = spec.pop("pending", None)
            if pending is not None and pending not in PENDING:
                raise ValueError(f"{where}: pending = {pending!r}, allowed: {', '.join(PENDING)}")
            reason = spec.pop("reason", "")
            if pending is not None and not reason:
                raise ValueError(f"{where}: a pending program needs a reason")
            issue = spec.pop("issue", None)
            if issue not in ISSUES:
                raise ValueError(f"{where}: issue = {issue!r}, allowed: {', '.join(ISSUES)}")
            entries.append(
                Entry(
                    section=section,
                    name=name,
                    issue=issue,
                    order=order,
                    strip_prefix=bool(spec.pop("strip_prefix", False)),
                    pending=pending,
                    reason=reason,
                    args=tuple(str(a) for a in spec.pop("args", [])),
                    ignore_lines=tuple(spec.pop("ignore_lines", [])),
                    why=spec.pop("why", ""),
                )
            )
            if spec:
                raise ValueError(f"{where}: unknown keys {sorted(spec)}")
    return entries


def rewrite_imports(source: str) -> str:
    """The program with ``from pyflink...``/``import pyflink...`` turned into sparkpoint's."""
    return _IMPORT.sub(r"\1sparkpoint", source)


def run_program(path: Path, args: tuple[str, ...] = ()) -> str:
    """Run ``path`` (a PyFlink program) on sparkpoint in this process; its standard output."""
    code = compile(rewrite_imports(path.read_text()), str(path), "exec")
    namespace: dict[str, Any] = {"__name__": "__main__", "__file__": str(path)}
    out = io.StringIO()
    saved_argv = sys.argv
    sys.argv = [str(path), *args]
    try:
        with contextlib.redirect_stdout(out):
            exec(code, namespace)
    finally:
        sys.argv = saved_argv
    return out.getvalue()


def normalise(text: str, strip_prefix: bool, ignore_lines: tuple[str, ...] = ()) -> list[str]:
    """Output lines without those matching ``ignore_lines``; with ``strip_prefix`` the print
    sink's subtask number is dropped (``id:2> x`` becomes ``id> x``, ``2> x`` becomes ``x``)."""
    lines = [x for x in text.splitlines() if not any(re.search(p, x) for p in ignore_lines)]
    if not strip_prefix:
        return lines
    result = []
    for line in lines:
        m = _PREFIX.match(line)
        if m is None:
            result.append(line)
        elif m.group("only") is not None:
            result.append(line[m.end() :])
        else:
            result.append(f"{m.group('id')}> {line[m.end() :]}")
    return result


def sink_of(line: str) -> str:
    """The print prefix a line carries (``""`` for none): its sink (and subtask)."""
    m = _PREFIX.match(line)
    return m.group(0) if m else ""


def differences(expected: list[str], actual: list[str], order: str) -> list[str]:
    """What differs between two outputs under the comparison ``order``; empty when equal."""
    if order == "exact":
        return [] if expected == actual else _line_diff(expected, actual)
    if order == "unordered":
        missing = Counter(expected) - Counter(actual)
        extra = Counter(actual) - Counter(expected)
        return [f"- {line}" for line in sorted(missing.elements())] + [
            f"+ {line}" for line in sorted(extra.elements())
        ]
    problems = []
    for sink in sorted({sink_of(x) for x in expected + actual}):
        want = [x for x in expected if sink_of(x) == sink]
        got = [x for x in actual if sink_of(x) == sink]
        if want != got:
            problems += [f"sink {sink!r}:", *_line_diff(want, got)]
    return problems


def _line_diff(expected: list[str], actual: list[str]) -> list[str]:
    import difflib

    return list(difflib.unified_diff(expected, actual, "pyflink", "sparkpoint", lineterm=""))
