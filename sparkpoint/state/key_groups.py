"""Key groups exactly as Flink's ``KeyGroupRangeAssignment`` computes them.

``key_group = murmur_hash(key_hash(key) + 62) % max_parallelism``. ``key_hash`` is a stable
32-bit hash (never Python's salted ``hash()``): for ``int`` and ``str`` it is Java's
``hashCode`` of ``Integer``/``Long``/``String``. The ``+ 62`` is PyFlink's: its ``key_by``
keys the Java side by ``Row.of(key)``, whose ``hashCode`` is the key's plus 62, so a key
lands in the key group (and the subtask) it has in PyFlink with a typed key
(``key_by(..., key_type=...)``). Java Flink keys by the raw key (no ``+ 62``). Checkpoint
metadata before format version 2 used that rule; ``KEY_GROUPS_SINCE_FORMAT`` says so.

A key declared with ``key_by(..., key_type=...)`` is hashed as PyFlink hashes it: as the
declared Java type (``KeyGroupAssigner``). That differs from the value rule for ``LONG``
(``Long.hashCode``: -5 hashes to 4, not -5), ``FLOAT`` (``Float.hashCode``), ``DOUBLE``
(``Double.hashCode`` also of integral values) and ``BOOLEAN``; ``INT``, ``SHORT``, ``BYTE`` and
``STRING`` hash as the value rule does. Keys without a declared type (or of another type)
keep the value rule below, so untyped jobs' key groups are unchanged.

Supported key types with a defined, process-independent hash: ``int``, ``str``, ``bytes``,
``bool``, ``None``, ``float``, tuples and ``Row`` of these. Any other key is hashed through
its pickled bytes, which is only stable when the pickle is deterministic (so avoid dicts and
sets as keys: their pickles depend on insertion/hash order).
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.errors import RestoreError

__all__ = [
    "DEFAULT_LOWER_BOUND_MAX_PARALLELISM",
    "KEY_GROUPS_SINCE_FORMAT",
    "UNTYPED_KEYS",
    "UPPER_BOUND_MAX_PARALLELISM",
    "KeyGroupAssigner",
    "assign_key_groups_int64",
    "assign_to_key_group",
    "check_max_parallelism",
    "check_parallelism_preconditions",
    "compute_default_max_parallelism",
    "compute_key_group_for_key_hash",
    "compute_key_group_range_for_operator_index",
    "compute_operator_index_for_key_group",
    "int64_key_groups",
    "key_group_assigner_of",
    "key_hash",
    "murmur_hash",
    "row_hash",
    "str_key_groups",
]

DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 1 << 7
UPPER_BOUND_MAX_PARALLELISM = 1 << 15

_M32 = 0xFFFFFFFF
_INT_MIN = -(1 << 31)
_INT_MAX = (1 << 31) - 1
_ROW_OF_KEY = 62  # Row.of(key).hashCode() - key.hashCode(): row kind 0, one field
KEY_GROUPS_SINCE_FORMAT = 2  # the first _metadata format version with these key groups


def _to_int32(v: int) -> int:
    """Reinterpret the low 32 bits of ``v`` as a signed Java int."""
    v &= _M32
    return v - (1 << 32) if v & 0x80000000 else v


def murmur_hash(code: int) -> int:
    """Flink's ``MathUtils.murmurHash(int)``: non-negative 32-bit murmur3 finaliser."""
    c = code & _M32
    c = (c * 0xCC9E2D51) & _M32
    c = ((c << 15) | (c >> 17)) & _M32
    c = (c * 0x1B873593) & _M32
    c = ((c << 13) | (c >> 19)) & _M32
    c = (c * 5 + 0xE6546B64) & _M32
    c ^= 4
    c ^= c >> 16
    c = (c * 0x85EBCA6B) & _M32
    c ^= c >> 13
    c = (c * 0xC2B2AE35) & _M32
    c ^= c >> 16
    if c & 0x80000000:
        signed = c - (1 << 32)
        return 0 if signed == _INT_MIN else -signed
    return c


def _str_hash(s: str) -> int:
    """Java ``String.hashCode`` over UTF-16 code units."""
    h = 0
    if s.isascii():
        for ch in s.encode("ascii"):
            h = (31 * h + ch) & _M32
    else:
        data = s.encode("utf-16-be", "surrogatepass")
        for (unit,) in struct.iter_unpack(">H", data):
            h = (31 * h + unit) & _M32
    return _to_int32(h)


def _int_hash(v: int) -> int:
    """Java ``Integer.hashCode`` inside int32, else ``Long.hashCode`` of the low 64 bits."""
    if _INT_MIN <= v <= _INT_MAX:
        return v
    u = v & 0xFFFFFFFFFFFFFFFF
    return _to_int32(u ^ (u >> 32))


def _float_hash(v: float) -> int:
    """Java ``Double.hashCode`` (``doubleToLongBits``: NaN canonicalised)."""
    if v != v:
        bits = 0x7FF8000000000000
    else:
        (bits,) = struct.unpack(">Q", struct.pack(">d", v))
    return _to_int32(bits ^ (bits >> 32))


def _bytes_hash(b: bytes | bytearray | memoryview) -> int:
    """Java ``Arrays.hashCode(byte[])`` over signed bytes."""
    h = 1
    for x in bytes(b):
        h = (31 * h + (x - 256 if x > 127 else x)) & _M32
    return _to_int32(h)


def key_hash(key: Any) -> int:
    """A stable signed 32-bit hash of ``key``, equal to Java's ``hashCode`` where Flink has one."""
    t = type(key)
    if t is int:
        return _int_hash(key)
    if t is str:
        return _str_hash(key)
    if t is bool:
        return 1231 if key else 1237
    if key is None:
        return 0
    if t is float:
        return _float_hash(key)
    if isinstance(key, bytes | bytearray | memoryview):
        return _bytes_hash(key)
    if isinstance(key, tuple):  # tuple and Row: Arrays.hashCode-like
        h = 1
        for elem in key:
            h = (31 * h + key_hash(elem)) & _M32
        return _to_int32(h)
    if isinstance(key, int):  # int subclasses (IntEnum, numpy ints via __index__ below)
        return _int_hash(int(key))
    if isinstance(key, np.integer):
        return _int_hash(int(key))
    if isinstance(key, np.floating):
        return _float_hash(float(key))
    if isinstance(key, str):
        return _str_hash(str(key))
    return _bytes_hash(pickle.dumps(key, protocol=5))


def compute_key_group_for_key_hash(hash_code: int, max_parallelism: int) -> int:
    """The key group of a key object whose Java ``hashCode`` is ``hash_code`` (Flink's
    ``computeKeyGroupForKeyHash``; sparkpoint's key object is ``Row.of(key)``)."""
    return murmur_hash(hash_code) % max_parallelism


def row_hash(key: Any) -> int:
    """Java ``hashCode`` of ``Row.of(key)`` (an insert row): ``31 * (31 * 1 + 0) + h``."""
    return _to_int32(key_hash(key) + _ROW_OF_KEY)


def assign_to_key_group(key: Any, max_parallelism: int) -> int:
    """The key group ``key`` belongs to: PyFlink's, ``assignToKeyGroup(Row.of(key))``."""
    return murmur_hash(row_hash(key)) % max_parallelism


def compute_key_group_range_for_operator_index(
    max_parallelism: int, parallelism: int, operator_index: int
) -> KeyGroupRange:
    """The contiguous key groups subtask ``operator_index`` of ``parallelism`` owns."""
    check_parallelism_preconditions(parallelism, max_parallelism)
    if not 0 <= operator_index < parallelism:
        raise ValueError(
            f"operator_index {operator_index} must be in [0, {parallelism}) for parallelism "
            f"{parallelism}"
        )
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange.of(start, end)


def compute_operator_index_for_key_group(
    max_parallelism: int, parallelism: int, key_group: int
) -> int:
    """The subtask of ``parallelism`` that owns ``key_group``."""
    if not 0 <= key_group < max_parallelism:
        raise ValueError(f"key_group {key_group} must be in [0, {max_parallelism})")
    return key_group * parallelism // max_parallelism


def _round_up_to_power_of_two(x: int) -> int:
    """Smallest power of two >= x (x >= 1)."""
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def compute_default_max_parallelism(parallelism: int) -> int:
    """Flink's default: ``min(max(roundUpPow2(p + p // 2), 128), 32768)``."""
    if parallelism <= 0:
        raise ValueError(f"Operator parallelism must be greater than 0, was {parallelism}")
    return min(
        max(
            _round_up_to_power_of_two(parallelism + parallelism // 2),
            DEFAULT_LOWER_BOUND_MAX_PARALLELISM,
        ),
        UPPER_BOUND_MAX_PARALLELISM,
    )


def check_parallelism_preconditions(parallelism: int, max_parallelism: int) -> None:
    """Raise ``ValueError`` with Flink's messages unless ``0 < p <= maxP <= 32767``."""
    if not 0 < max_parallelism <= UPPER_BOUND_MAX_PARALLELISM - 1:
        raise ValueError(
            f"Maximum parallelism must be between 1 and {UPPER_BOUND_MAX_PARALLELISM - 1}. "
            f"Found: {max_parallelism}"
        )
    if parallelism <= 0:
        raise ValueError(f"Operator parallelism must be greater than 0. Found: {parallelism}")
    if parallelism > max_parallelism:
        raise ValueError(
            f"Maximum parallelism ({max_parallelism}) must not be smaller than parallelism "
            f"({parallelism})."
        )


def check_max_parallelism(restored: int, configured: int, what: str = "") -> None:
    """Refuse state written under another max parallelism (key groups would not line up)."""
    if restored != configured:
        raise RestoreError(
            "Max parallelism mismatch between checkpoint/savepoint state and new program. "
            f"Cannot map {what or 'keyed state'} with max parallelism {restored} to new "
            f"program with max parallelism {configured}. This indicates that the program "
            "has been changed in a non-compatible way after the checkpoint/savepoint."
        )


def _murmur_u32_array(codes: np.ndarray) -> np.ndarray:
    """Vectorised ``murmur_hash`` over an int array of 32-bit hash codes (uint32 math)."""
    c = codes.astype(np.uint32, copy=True)
    with np.errstate(over="ignore"):
        c *= np.uint32(0xCC9E2D51)
        c = (c << np.uint32(15)) | (c >> np.uint32(17))
        c *= np.uint32(0x1B873593)
        c = (c << np.uint32(13)) | (c >> np.uint32(19))
        c = c * np.uint32(5) + np.uint32(0xE6546B64)
        c ^= np.uint32(4)
        c ^= c >> np.uint32(16)
        c *= np.uint32(0x85EBCA6B)
        c ^= c >> np.uint32(13)
        c *= np.uint32(0xC2B2AE35)
        c ^= c >> np.uint32(16)
    signed = c.view(np.int32).astype(np.int64)
    return np.where(signed < 0, np.where(signed == _INT_MIN, 0, -signed), signed)


def assign_key_groups_int64(keys: Any, max_parallelism: int) -> np.ndarray:
    """Key groups of an array of int64 keys (numpy or pyarrow), identical to
    ``assign_to_key_group`` per element; returns an int32 numpy array."""
    if hasattr(keys, "to_numpy"):
        keys = keys.to_numpy(zero_copy_only=False)
    arr = np.asarray(keys, dtype=np.int64)
    u = arr.view(np.uint64)
    long_hash = (u ^ (u >> np.uint64(32))).astype(np.uint32)
    in_int = (arr >= _INT_MIN) & (arr <= _INT_MAX)
    codes = np.where(in_int, arr.astype(np.uint32), long_hash) + np.uint32(_ROW_OF_KEY)
    return (_murmur_u32_array(codes) % max_parallelism).astype(np.int32)


def int64_key_groups(keys: Sequence[Any], max_parallelism: int) -> np.ndarray | None:
    """Key groups of a batch of keys in one vectorised pass when every key is a Python
    ``int`` that fits int64 (the common case); ``None`` when some key is not."""
    if not keys or set(map(type, keys)) != {int}:
        return None
    try:
        arr = np.fromiter(keys, np.int64, len(keys))
    except OverflowError:  # some key does not fit int64
        return None
    return assign_key_groups_int64(arr, max_parallelism)


_STR_CHUNK = 1 << 16  # keys hashed per numpy pass (bounds the per-character arrays)


def str_key_groups(keys: Sequence[Any], max_parallelism: int) -> np.ndarray | None:
    """Key groups of a batch of keys in vectorised passes when every key is an ASCII
    ``str`` (``String.hashCode``, a polynomial in 31 of the characters, mod 2^32); ``None``
    when some key is not. Identical to ``assign_to_key_group`` per key."""
    if not keys or set(map(type, keys)) != {str}:
        return None
    out = np.empty(len(keys), np.int32)
    for lo in range(0, len(keys), _STR_CHUNK):
        chunk = keys[lo : lo + _STR_CHUNK]
        try:
            chars = np.frombuffer("".join(chunk).encode("ascii"), np.uint8)
        except UnicodeEncodeError:
            return None
        lens = np.fromiter(map(len, chunk), np.int64, len(chunk))
        ends = np.cumsum(lens)
        hashes = np.zeros(len(chunk), np.uint32)
        if len(chars):
            powers = np.ones(int(lens.max()), np.uint32)
            with np.errstate(over="ignore"):
                np.cumprod(np.full(len(powers) - 1, 31, np.uint32), out=powers[1:])
                # each character times 31 ** (the characters after it in its key)
                after = np.repeat(ends, lens) - 1 - np.arange(len(chars))
                terms = chars.astype(np.uint32) * powers[after]
                nonempty = lens > 0
                hashes[nonempty] = np.add.reduceat(terms, (ends - lens)[nonempty], dtype=np.uint32)
        codes = hashes + np.uint32(_ROW_OF_KEY)
        out[lo : lo + len(chunk)] = _murmur_u32_array(codes) % max_parallelism
    return out


def _long_key_hash(key: Any) -> int:
    """``Long.hashCode`` of the low 64 bits of ``key``."""
    u = int(key) & 0xFFFFFFFFFFFFFFFF
    return _to_int32(u ^ (u >> 32))


def _float_key_hash(key: Any) -> int:
    """``Float.hashCode`` (``floatToIntBits``: NaN canonicalised) of ``(float) key``."""
    x = float(key)
    if x != x:
        return 0x7FC00000
    try:
        (bits,) = struct.unpack(">i", struct.pack(">f", x))
    except OverflowError:  # beyond the float range: Java's cast gives an infinity
        (bits,) = struct.unpack(">i", struct.pack(">f", float("inf") if x > 0 else -float("inf")))
    return int(bits)


_TYPED_HASHES = {
    "LONG": _long_key_hash,
    "FLOAT": _float_key_hash,
    "DOUBLE": lambda key: _float_hash(float(key)),
    "BOOLEAN": lambda key: 1231 if key else 1237,
}
"""The declared key types whose Java ``hashCode`` can differ from ``key_hash`` of the value."""


class KeyGroupAssigner:
    """Assigns the keys of one keyed stream to key groups: by the Java ``hashCode`` of the
    declared key type (``key_by(..., key_type=...)``) as PyFlink does, else by the value."""

    __slots__ = ("_hash", "type_name")

    def __init__(self, key_type: Any = None) -> None:
        name = getattr(key_type, "type_name", None)
        self.type_name: str | None = name if name in _TYPED_HASHES else None
        self._hash = _TYPED_HASHES.get(name, key_hash) if isinstance(name, str) else key_hash

    def key_group(self, key: Any, max_parallelism: int) -> int:
        """The key group of ``key`` (a null key hashes to 0, as in Java)."""
        code = 0 if key is None else self._hash(key)
        return murmur_hash(_to_int32(code + _ROW_OF_KEY)) % max_parallelism

    def int64_key_groups(self, keys: Sequence[Any], max_parallelism: int) -> np.ndarray | None:
        """Key groups of a batch in one vectorised pass when every key is an ``int`` of 64
        bits and the rule allows it; ``None`` otherwise (then per key: ``key_group``)."""
        if self.type_name is None:
            return int64_key_groups(keys, max_parallelism)
        if self.type_name != "LONG" or not keys or set(map(type, keys)) != {int}:
            return None
        try:
            arr = np.fromiter(keys, np.int64, len(keys))
        except OverflowError:
            return None
        u = arr.view(np.uint64)
        codes = (u ^ (u >> np.uint64(32))).astype(np.uint32) + np.uint32(_ROW_OF_KEY)
        return (_murmur_u32_array(codes) % max_parallelism).astype(np.int32)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyGroupAssigner) and other.type_name == self.type_name

    def __hash__(self) -> int:
        return hash(self.type_name)

    def __repr__(self) -> str:
        return f"KeyGroupAssigner({self.type_name or 'untyped'})"


UNTYPED_KEYS = KeyGroupAssigner()
"""Keys hashed by their value (``assign_to_key_group``): no declared key type."""


def key_group_assigner_of(key_selector: Any) -> KeyGroupAssigner:
    """The assigner a key selector carries (``key_by(..., key_type=...)``), else untyped."""
    assigner = getattr(key_selector, "key_group_assigner", None)
    return assigner if isinstance(assigner, KeyGroupAssigner) else UNTYPED_KEYS
