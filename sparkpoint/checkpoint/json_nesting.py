"""How deep JSON read from a snapshot may nest, checked before it is parsed.

``json.loads`` and everything that walks its result recurse once per level, so a master
state or a header nested 100,000 deep raises ``RecursionError`` (or worse) far from where
the bytes were read. What sparkpoint writes nests a few levels; ``MAX_JSON_DEPTH`` leaves
room for nested sources' and serializers' state, and the caller turns the ``ValueError``
into its format's named error.
"""

from __future__ import annotations

import re

__all__ = ["MAX_JSON_DEPTH", "check_json_nesting"]

MAX_JSON_DEPTH = 100
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


def check_json_nesting(data: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise ``ValueError`` when the JSON text ``data`` nests arrays/objects deeper than
    ``max_depth`` (brackets inside strings do not count); malformed text is left to the
    parser."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if raw.count(b"[") + raw.count(b"{") <= max_depth:
        return
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub(b"", raw)):
        if match.group() in (b"[", b"{"):
            depth += 1
            if depth > max_depth:
                raise ValueError(
                    f"JSON nested more than {max_depth} levels deep (at most {max_depth})"
                )
        else:
            depth -= 1
