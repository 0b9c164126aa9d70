"""A bounded pre-scan of pickled snapshot bytes, run before any of them is unpickled.

Unpickling is linear in the bytes, but what it builds need not be: memo references share
one object many times (a chain of tuples each holding the previous one twice is 2^n values
in a few hundred bytes, and hashing it as a dict key never ends), and a key nested 10^6
tuples deep overflows the C stack of whatever hashes or compares it. The scan walks the
opcodes without building anything (``pickletools``' opcode table, no object is made), models
the containers they build and the references between them, and refuses a pickle whose
values nest deeper than ``MAX_DEPTH`` or expand (every reference followed) to more than
``max(MIN_EXPANSION, EXPANSION_PER_BYTE * len(data))`` values; it also refuses bytes that
are not a well-formed pickle. What ``pickle.dumps`` writes always passes: it cannot write
values nested deeper than Python's recursion limit.
"""

from __future__ import annotations

import pickletools
import struct
from typing import Any

from sparkpoint.errors import CorruptStateError

__all__ = ["EXPANSION_PER_BYTE", "MAX_DEPTH", "MIN_EXPANSION", "SAFE_SIZE", "scan_pickle"]

MAX_DEPTH = 1000
MIN_EXPANSION = 1 << 20
EXPANSION_PER_BYTE = 256
# A pickle this short is within both bounds whatever it holds, so callers may skip the scan
# (keys are mostly this short): it nests at most one level per byte, and references expand
# it fastest by tripling every three bytes (DUP DUP TUPLE3), 3 ** (37 / 3) < MIN_EXPANSION.
SAFE_SIZE = 37

_UNSIGNED = {1: "<B", 2: "<H", 4: "<I"}
_FRAME = 0x95
_LEAF = -1
_MARK = -2

# opcode byte -> (argument reader, action)
_FIXED = {"uint1": 1, "uint2": 2, "int4": 4, "uint4": 4, "uint8": 8, "float8": 8}
_COUNTED = {
    "string1": (1, "<B"),
    "bytes1": (1, "<B"),
    "unicodestring1": (1, "<B"),
    "long1": (1, "<B"),
    "string4": (4, "<i"),
    "long4": (4, "<i"),
    "bytes4": (4, "<I"),
    "unicodestring4": (4, "<I"),
    "bytes8": (8, "<Q"),
    "unicodestring8": (8, "<Q"),
    "bytearray8": (8, "<Q"),
}
_LINES = {
    "decimalnl_short": 1,
    "decimalnl_long": 1,
    "stringnl": 1,
    "stringnl_noescape": 1,
    "unicodestringnl": 1,
    "floatnl": 1,
    "stringnl_noescape_pair": 2,
}
_ACTIONS = {
    "EMPTY_LIST": "new",
    "EMPTY_TUPLE": "new",
    "EMPTY_DICT": "new",
    "EMPTY_SET": "new",
    "LIST": "new_mark",
    "TUPLE": "new_mark",
    "DICT": "new_mark",
    "FROZENSET": "new_mark",
    "INST": "new_mark",
    "OBJ": "new_mark",
    "TUPLE1": "new1",
    "TUPLE2": "new2",
    "TUPLE3": "new3",
    "REDUCE": "new2",
    "NEWOBJ": "new2",
    "NEWOBJ_EX": "new3",
    "APPEND": "add1",
    "BUILD": "add1",
    "SETITEM": "add2",
    "APPENDS": "add_mark",
    "SETITEMS": "add_mark",
    "ADDITEMS": "add_mark",
    "STACK_GLOBAL": "pop2_leaf",
    "BINPERSID": "pop1_leaf",
    "READONLY_BUFFER": "keep",
    "POP": "pop",
    "DUP": "dup",
    "MARK": "mark",
    "POP_MARK": "pop_mark",
    "GET": "get",
    "BINGET": "get",
    "LONG_BINGET": "get",
    "PUT": "put",
    "BINPUT": "put",
    "LONG_BINPUT": "put",
    "MEMOIZE": "memoize",
    "PROTO": "none",
    "FRAME": "none",
    "STOP": "stop",
}
_OPS: dict[int, tuple[str, Any, str]] = {}
for _op in pickletools.opcodes:
    _arg = _op.arg.name if _op.arg is not None else None
    _kind: Any
    if _arg is None:
        _kind = ("fixed", 0)
    elif _arg in _FIXED:
        _kind = ("fixed", _FIXED[_arg])
    elif _arg in _COUNTED:
        _kind = ("counted", *_COUNTED[_arg])
    else:
        _kind = ("lines", _LINES[_arg])
    _OPS[ord(_op.code)] = (_op.name, _kind, _ACTIONS.get(_op.name, "leaf"))


class _Malformed(Exception):
    pass


_ACTION_CODES = {
    name: i
    for i, name in enumerate(
        (
            "leaf", "new", "new_mark", "new1", "new2", "new3", "add1", "add2", "add_mark",
            "pop1_leaf", "pop2_leaf", "keep", "pop", "dup", "mark", "pop_mark", "get", "put",
            "memoize", "none", "stop",
        )
    )
}  # fmt: skip
# opcode byte -> (action code, fixed argument width or -1, counted: (width, struct) or None,
# text lines)
_TABLE: list[tuple[int, int, Any, int] | None] = [None] * 256
for _code, (_name, _kind, _action) in _OPS.items():
    _TABLE[_code] = (
        _ACTION_CODES[_action],
        _kind[1] if _kind[0] == "fixed" else -1,
        struct.Struct(_kind[2]) if _kind[0] == "counted" else None,
        _kind[1] if _kind[0] == "lines" else 0,
    )


class _Graph:
    """Containers (node ids; 0 is every scalar) with their depth and expanded size, kept
    exact while each container is filled before it is put in another (what ``pickle.dumps``
    writes); ``exact`` turns false when a container is filled afterwards, and the caller
    then measures the whole graph (``_measure``)."""

    def __init__(self, record: bool) -> None:
        self.record = record  # keep every container's children (for ``_measure``)
        self.children: list[list[int]] = [[]]
        self.depth = [0]
        self.size = [1]
        self.contained = [False]
        self.exact = True

    def new(self, items: list[int]) -> int:
        depth, size, contained = self.depth, self.size, self.contained
        d = s = 0
        for i in items:
            if i:
                contained[i] = True
                if depth[i] > d:
                    d = depth[i]
            s += size[i]
        if self.record:
            self.children.append([i for i in items if i])
        depth.append(d + 1)
        size.append(min(s + 1, 1 << 62))
        contained.append(False)
        return len(depth) - 1

    def add(self, target: int, items: list[int]) -> None:
        if not target:
            return
        if self.contained[target]:
            self.exact = False
        depth, size = self.depth, self.size
        for i in items:
            if i:
                self.contained[i] = True
                if self.record:
                    self.children[target].append(i)
                if depth[i] + 1 > depth[target]:
                    depth[target] = depth[i] + 1
            size[target] = min(size[target] + size[i], 1 << 62)


def _pop_to_mark(stack: list[int]) -> list[int]:
    for at in range(len(stack) - 1, -1, -1):
        if stack[at] < 0:
            items = stack[at + 1 :]
            del stack[at:]
            return items
    raise _Malformed("an opcode needs a mark the stack does not hold")


def _pop(stack: list[int]) -> int:
    if not stack or stack[-1] < 0:
        raise _Malformed("an opcode takes a value from an empty stack")
    return stack.pop()


def _run(view: bytes, record: bool) -> tuple[_Graph, int]:  # noqa: C901 - the opcode loop
    """Model every opcode up to STOP; returns the graph and the node of the result."""
    graph = _Graph(record)
    stack: list[int] = []
    memo: dict[int, int] = {}
    table = _TABLE
    pos, n = 0, len(view)
    new, add = graph.new, graph.add
    while pos < n:
        spec = table[view[pos]]
        if spec is None:
            raise _Malformed(f"unknown opcode {view[pos]:#04x} at byte {pos}")
        action, width, counted, lines = spec
        pos += 1
        value = -1
        if width > 0:
            if pos + width > n:
                raise _Malformed("a truncated argument")
            if width == 1:
                value = view[pos]
            elif width == 4:
                value = int.from_bytes(view[pos : pos + 4], "little")
            pos += width
        elif counted is not None:
            if pos + counted.size > n:
                raise _Malformed("a truncated length")
            length = counted.unpack_from(view, pos)[0]
            pos += counted.size + length
            if length < 0 or pos > n:
                raise _Malformed(f"a {length}-byte argument past the end of the data")
        elif lines:
            for _ in range(lines):
                nl = view.find(b"\n", pos)
                if nl < 0:
                    raise _Malformed("a text argument without its newline")
                line = view[pos:nl]
                pos = nl + 1
            value = int(line) if lines == 1 and line.isdigit() else -1
        if action == 19 and lines == 0 and width == 8 and view[pos - 9] == _FRAME:
            (frame,) = struct.unpack_from("<Q", view, pos - 8)
            if frame > n - pos:
                raise _Malformed(f"a frame of {frame} bytes past the end of the data")
            continue
        if action == 0:  # leaf
            stack.append(0)
            continue
        if action == 18:  # memoize
            if not stack or stack[-1] < 0:
                raise _Malformed("a memo write of an empty stack")
            memo[len(memo)] = stack[-1]
            continue
        if action == 14:  # mark
            stack.append(-1)
            continue
        if action == 1:  # new
            stack.append(new([]))
        elif action == 2:  # new_mark
            stack.append(new(_pop_to_mark(stack)))
        elif action <= 5:  # new1..3
            if len(stack) < action - 2 or min(stack[2 - action :]) < 0:
                raise _Malformed("a tuple of values the stack does not hold")
            items = stack[2 - action :]
            del stack[2 - action :]
            stack.append(new(items))
        elif action <= 8:  # add1, add2, add_mark
            if action == 8:
                items = _pop_to_mark(stack)
            else:
                items = [_pop(stack) for _ in range(action - 5)]
            if not stack or stack[-1] < 0:
                raise _Malformed("an opcode adds to a container the stack does not hold")
            add(stack[-1], items)
        elif action <= 10:  # pop1_leaf, pop2_leaf
            for _ in range(action - 8):
                _pop(stack)
            stack.append(0)
        elif action == 11:  # keep
            stack.append(_pop(stack))
        elif action == 12:  # pop (a mark too, as the unpickler does)
            if not stack:
                raise _Malformed("POP of an empty stack")
            stack.pop()
        elif action == 13:  # dup
            stack.append(_pop(stack))
            stack.append(stack[-1])
        elif action == 15:  # pop_mark
            _pop_to_mark(stack)
        elif action == 16:  # get
            if value not in memo:
                raise _Malformed(f"memo key {value} read before it was written")
            stack.append(memo[value])
        elif action == 17:  # put
            if not stack or stack[-1] < 0:
                raise _Malformed("a memo write of an empty stack")
            memo[value] = stack[-1]
        elif action == 20:  # stop
            return graph, _pop(stack)
    raise _Malformed("the data ends before the STOP opcode")


def _measure(children: list[list[int]], root: int, max_size: int) -> tuple[int, int]:
    """``(depth, expanded size)`` of ``root`` (references followed; size saturates just above
    ``max_size``; a reference back to a container being walked, a cycle, adds nothing)."""
    depth: dict[int, int] = {0: 0}
    size: dict[int, int] = {0: 1}
    on_path: set[int] = set()
    todo: list[tuple[int, bool]] = [(root, False)]
    while todo:
        node, done = todo.pop()
        if done:
            on_path.discard(node)
            kids = [c for c in children[node] if c in depth]
            depth[node] = 1 + max((depth[c] for c in kids), default=0)
            size[node] = min(max_size + 1, 1 + sum(size[c] for c in kids))
            continue
        if node in depth or node in on_path:
            continue
        on_path.add(node)
        todo.append((node, True))
        todo.extend((c, False) for c in children[node] if c not in depth and c not in on_path)
    return depth[root], size[root]


def scan_pickle(data: bytes | memoryview, what: str) -> None:
    """Refuse (``CorruptStateError`` naming ``what``) a pickle that is malformed, nests
    deeper than ``MAX_DEPTH`` or expands past its bound; return when it is safe to unpickle."""
    view = data if isinstance(data, bytes) else bytes(data)
    max_size = max(MIN_EXPANSION, EXPANSION_PER_BYTE * len(view))
    try:
        graph, root = _run(view, record=False)
        if graph.exact:
            depth, size = graph.depth[root], graph.size[root]
        else:  # a container filled after it was put in another: walk the whole graph
            graph, root = _run(view, record=True)
            depth, size = _measure(graph.children, root, max_size)
    except (_Malformed, ValueError, struct.error) as exc:
        raise CorruptStateError(f"Refusing {what}: not a well-formed pickle ({exc})") from None
    if depth > MAX_DEPTH:
        raise CorruptStateError(
            f"Refusing {what}: its pickle nests values {depth} levels deep (at most "
            f"{MAX_DEPTH}: deeper values overflow the stack of whatever hashes or compares them)"
        )
    if size > max_size:
        raise CorruptStateError(
            f"Refusing {what}: its {len(view)}-byte pickle refers to shared values so often "
            f"that it holds more than {max_size} values when every reference is followed "
            f"(at most {EXPANSION_PER_BYTE} per byte, or {MIN_EXPANSION}); hashing or walking "
            "it would not end"
        )
