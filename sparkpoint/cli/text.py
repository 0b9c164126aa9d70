"""Terminal-safe text: what the CLI prints from a snapshot, with non-printables escaped.

A snapshot is input from outside: its operator ids, state and handle names, master states
and even the file names under a checkpoint directory may hold ANSI escape sequences, bidi
overrides or newlines that would rewrite the operator's terminal or forge lines of output.
Every such string passes through ``printable`` before it is printed as text; JSON output
escapes them itself (``json.dumps`` with ``ensure_ascii``).
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["one_line", "printable", "printable_tree", "report"]


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(value: object) -> str:
    """``value`` as text in which every character that is not printable (controls, escape
    sequences, bidi overrides and other format characters, line and paragraph separators,
    unassigned and surrogate code points) is shown as ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN``.
    """
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def printable_tree(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, scalars) with every string in it, dict keys
    included, passed through ``printable``."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable_tree(k): printable_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable_tree(v) for v in value]
    return value


def one_line(text: object) -> str:
    """``text`` on one printable line (runs of whitespace, line breaks included, become
    one space)."""
    return printable(" ".join(str(text).split()))


def report(message: object) -> None:
    """Print ``sparkpoint: <message>`` as one printable line on stderr."""
    print(f"sparkpoint: {one_line(message)}", file=sys.stderr)
