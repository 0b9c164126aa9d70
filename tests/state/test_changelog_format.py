"""Changelog entries: compressed (version 2), still readable when uncompressed (version 1),
refused with the entry named when corrupt, truncated or written by the other backend."""

from __future__ import annotations

import struct

import pytest

from sparkpoint.errors import RestoreError
from sparkpoint.state.changelog import (
    decode_entry,
    decode_kv_changes,
    encode_entry,
    encode_kv_changes,
)

CHANGES = [(b"k%06d" % i, None if i % 5 == 0 else b"value-%d" % i) for i in range(20_000)]


def _columns(changes):  # type: ignore[no-untyped-def]
    return [k for k, _ in changes], [v for _, v in changes]


def test_entries_are_compressed_and_round_trip() -> None:
    payload = encode_kv_changes(*_columns(CHANGES))
    entry = encode_entry("rocksdb", payload)
    assert len(entry) < len(payload) / 2
    assert bytes(decode_entry(entry, "rocksdb", "#0")) == payload
    assert decode_kv_changes(decode_entry(entry, "rocksdb", "#0")) == CHANGES


def test_uncompressed_version_1_entries_still_read() -> None:
    payload = encode_kv_changes(*_columns(CHANGES[:10]))
    old = b"SPCL" + struct.pack(">BB", 1, len(b"heap")) + b"heap" + payload
    assert bytes(decode_entry(old, "heap", "#3")) == payload


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda e: e[: len(e) // 2], "Changelog entry #7 is corrupt"),
        (lambda e: e[:-40] + b"\x00" * 40, "Changelog entry #7 is corrupt"),
        (lambda e: b"XXXX" + e[4:], "is not a sparkpoint changelog entry"),
        (lambda e: e[:4] + bytes([9]) + e[5:], "has version 9"),
    ],
)
def test_damaged_entries_are_refused(damage, message) -> None:  # type: ignore[no-untyped-def]
    entry = encode_entry("rocksdb", encode_kv_changes(*_columns(CHANGES)))
    with pytest.raises(RestoreError, match=message):
        decode_kv_changes(decode_entry(damage(entry), "rocksdb", "#7"))


def test_an_entry_of_the_other_backend_is_refused() -> None:
    entry = encode_entry("heap", b"payload")
    with pytest.raises(RestoreError, match="written by the heap backend"):
        decode_entry(entry, "rocksdb", "#1")
