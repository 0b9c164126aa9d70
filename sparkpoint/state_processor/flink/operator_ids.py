"""Flink's operator id of a uid: the 128-bit murmur3 (x64, seed 0) of its UTF-8 bytes.

Flink's ``StreamGraphHasherV2`` hashes a uid with Guava's ``murmur3_128``; the id's hex form
is the 16 hash bytes in order (``OperatorID``'s lower part, then its upper part).
"""

from __future__ import annotations

__all__ = ["operator_id_of_uid"]

_M64 = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M64
    k ^= k >> 33
    return k


def murmur3_x64_128(data: bytes, seed: int = 0) -> bytes:
    """MurmurHash3 x64 128-bit of ``data``, as the 16 bytes Guava's ``asBytes()`` gives."""
    h1 = h2 = seed & _M64
    n = len(data)
    blocks = n // 16
    for i in range(blocks):
        k1 = int.from_bytes(data[16 * i : 16 * i + 8], "little")
        k2 = int.from_bytes(data[16 * i + 8 : 16 * i + 16], "little")
        k1 = (_rotl((k1 * _C1) & _M64, 31) * _C2) & _M64
        h1 ^= k1
        h1 = (_rotl(h1, 27) + h2) & _M64
        h1 = (h1 * 5 + 0x52DCE729) & _M64
        k2 = (_rotl((k2 * _C2) & _M64, 33) * _C1) & _M64
        h2 ^= k2
        h2 = (_rotl(h2, 31) + h1) & _M64
        h2 = (h2 * 5 + 0x38495AB5) & _M64
    tail = data[16 * blocks :]
    k1 = int.from_bytes(tail[:8], "little") if tail else 0
    k2 = int.from_bytes(tail[8:], "little") if len(tail) > 8 else 0
    if len(tail) > 8:
        k2 = (_rotl((k2 * _C2) & _M64, 33) * _C1) & _M64
        h2 ^= k2
    if tail:
        k1 = (_rotl((k1 * _C1) & _M64, 31) * _C2) & _M64
        h1 ^= k1
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    return h1.to_bytes(8, "little") + h2.to_bytes(8, "little")


def operator_id_of_uid(uid: str) -> str:
    """The hex operator id Flink gives the operator with ``uid``."""
    return murmur3_x64_128(uid.encode("utf-8")).hex()
