"""How pickled state read from a snapshot is unpickled: freely (``sparkpoint.snapshot.
allow-pickle`` true, the default), or by an unpickler that cannot import anything.

Unpickling runs code the bytes choose (a pickle names any function and calls it), so pickled
state is code. With allow-pickle false, pickles are still read when they hold plain data
only (numbers, strings, bytes, None, booleans, and tuples, lists, dicts and sets of them:
what untyped keys usually are), and any pickle that names a class or a function is refused
with ``UntrustedSnapshotError`` before anything of it runs.

Either way the bytes are pre-scanned first (``sparkpoint.checkpoint.pickle_scan``): a
pickle nested too deep, expanding through shared references past its bound, or malformed is
refused with ``CorruptStateError`` before any of it is unpickled.

The setting is per process: a job's tasks set it from the job, the CLI and the state
processor from their configuration. Local working files an executor wrote itself are not
snapshot input and are unpickled as they are.
"""

from __future__ import annotations

import io
import pickle
import re
from collections.abc import Sequence
from typing import Any

from sparkpoint.checkpoint.pickle_scan import SAFE_SIZE, scan_pickle
from sparkpoint.checkpoint.trust import refuse_pickle
from sparkpoint.errors import CorruptStateError, UntrustedSnapshotError

__all__ = ["loads", "loads_many", "loads_value", "pickle_allowed", "set_allow_pickle"]

_allowed = True


def set_allow_pickle(allowed: bool) -> None:
    """Whether this process unpickles snapshot state freely (True) or plain data only."""
    global _allowed
    _allowed = bool(allowed)


def pickle_allowed() -> bool:
    """The current setting (``set_allow_pickle``)."""
    return _allowed


class _PlainDataUnpickler(pickle.Unpickler):
    """Refuses every global (class, function, module attribute): what is left builds plain
    values only and calls nothing."""

    def __init__(self, data: Any, what: str) -> None:
        super().__init__(io.BytesIO(data))
        self._what = what

    def find_class(self, module: str, name: str) -> Any:
        raise refuse_pickle(f"{self._what}: it names {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise refuse_pickle(f"{self._what}: it holds a persistent id")


def loads(data: Any, what: str = "pickled state") -> Any:
    """``pickle.loads(data)``, or with allow-pickle false the plain-data reading above
    (``what`` names the state and file in the error), after the pre-scan of ``data``; bytes
    that do not unpickle raise ``CorruptStateError`` naming ``what``."""
    if len(data) > SAFE_SIZE:  # shorter ones are within the scan's bounds (pickle_scan)
        scan_pickle(data, what)
    try:
        if _allowed:
            return pickle.loads(data)
        return _PlainDataUnpickler(data, what).load()
    except UntrustedSnapshotError:
        raise
    except Exception as exc:  # malformed bytes the scan let through, or a failing reduce
        raise CorruptStateError(f"Refusing {what}: it does not unpickle: {exc!r}") from exc


def loads_value(data: Any, what: str = "pickled state") -> Any:
    """``loads`` for one state value (``PickleSerializer``: a read per record). With pickle
    allowed (the job's own or a signed snapshot, or the user's opt-in) the bytes' author may
    run code anyway, so the pre-scan, a guard for plain-data reading that costs 10-20x the
    unpickling of a small value, is left to the blocks ``loads`` reads."""
    if not _allowed:
        return loads(data, what)
    try:
        return pickle.loads(data)
    except Exception as exc:
        raise CorruptStateError(f"Refusing {what}: it does not unpickle: {exc!r}") from exc


# Every opcode that reaches ``find_class`` (GLOBAL, INST, STACK_GLOBAL, EXT1/2/4) or
# ``persistent_load`` (PERSID, BINPERSID). Bytes holding none of these values cannot name
# a class or function, so nothing callable reaches the stack (REDUCE, BUILD, NEWOBJ and OBJ
# then only fail): ``pickle.loads`` of them builds the plain data the plain-data unpickler
# would, without its per-pickle setup (~2 us against ~0.3 us for a short key).
_NAMING_OPCODES = re.compile(rb"[ci\x93\x82-\x84PQ]")


def loads_many(datas: Sequence[Any], what: str = "pickled state") -> list[Any]:
    """``[loads(d, what) for d in datas]``, with the same checks, results and errors, for a
    batch: with allow-pickle false the pickles whose bytes hold no opcode that can name
    anything (found in one search over the batch) load through ``pickle.loads``; the others
    through the plain-data unpickler."""
    try:
        for d in datas:
            if len(d) > SAFE_SIZE:
                scan_pickle(d, what)
        if _allowed:
            return [pickle.loads(d) for d in datas]
        joined = b"".join(datas)
        if _NAMING_OPCODES.search(joined) is None:
            return [pickle.loads(d) for d in datas]
        search = _NAMING_OPCODES.search
        return [
            pickle.loads(d) if search(d) is None else _PlainDataUnpickler(d, what).load()
            for d in datas
        ]
    except Exception:  # name the first pickle that fails, as ``loads`` does
        for d in datas:
            loads(d, what)
        raise
