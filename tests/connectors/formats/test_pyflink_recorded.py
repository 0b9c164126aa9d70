"""Avro and CSV rows against what PyFlink 2.3 wrote and read (pyflink_recorded.json, made by
scripts/record_pyflink_formats.py with PyFlink and Flink's format jars): sparkpoint writes the
bytes PyFlink writes, reads PyFlink's bytes and the cases' messages as PyFlink reads them
(failing where PyFlink fails), and PyFlink read the bytes sparkpoint writes as the rows given.
No JVM here: the recording holds PyFlink's side."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import pytest

from sparkpoint.state.typeinfo import BasicTypeInfo, RowTypeInfo
from sparkpoint.types import Row
from tests.connectors.formats import cases

CASES = cases.load_cases()
RECORDED = json.loads(cases.RECORDED.read_text(encoding="utf-8"))
WRITTEN_NOW = cases.sparkpoint_written()
IDS = [(fmt, case["name"]) for fmt in ("avro", "csv") for case in CASES[fmt]]


def _case(fmt: str, name: str) -> dict[str, Any]:
    return next(c for c in CASES[fmt] if c["name"] == name)


def _comparable(value: Any, t: Any) -> Any:
    """FLOAT fields as float32 bits (PyFlink hands Java's float as its float32 value, its
    JSON shows the shortest text); everything else as its repr (NaN equal to NaN)."""
    if value is None:
        return None
    if isinstance(t, RowTypeInfo):
        return [_comparable(v, ft) for v, ft in zip(value, t.get_field_types())]
    if isinstance(t, BasicTypeInfo) and t.type_name == "FLOAT":
        return struct.pack("<f", value)
    if isinstance(value, list):
        element = getattr(t, "element", None)
        return [_comparable(v, element) for v in value]
    return repr(value)


def _read(reader: Any, message: bytes) -> Any:
    try:
        return reader.deserialize(message)
    except ValueError as exc:
        return {"error": str(exc)}


def _expected(case: dict[str, Any], recorded: Any) -> Any:
    """A row PyFlink read (its JSON text), None (skipped) or {"error": ...} (it failed)."""
    if recorded is None or isinstance(recorded, dict):
        return recorded
    return cases.json_rows(case).deserialize(recorded.encode("utf-8"))


def _assert_reads(case: dict[str, Any], reader: Any, messages: list[bytes], want: list[Any]):
    assert len(messages) == len(want)
    t = cases.row_type(case)
    for message, recorded in zip(messages, want):
        got, expected = _read(reader, message), _expected(case, recorded)
        if isinstance(expected, dict):
            assert isinstance(got, dict), f"PyFlink failed on {message!r} ({expected}), got {got}"
        else:
            assert not isinstance(got, dict), f"{message!r}: {got}"
            assert isinstance(got, (Row, type(None)))
            assert _comparable(got, t) == _comparable(expected, t), message


@pytest.mark.parametrize(("fmt", "name"), IDS)
def test_writes_the_bytes_pyflink_writes(fmt: str, name: str) -> None:
    case = _case(fmt, name)
    writer, _ = cases.schemas(fmt, case)
    want = RECORDED[fmt][name]["written"]
    rows = cases.rows(case)
    assert len(rows) == len(want)
    for row, recorded in zip(rows, want):
        assert isinstance(recorded, str), f"PyFlink could not write {row}: {recorded}"
        assert writer.serialize(row) == base64.b64decode(recorded), row


@pytest.mark.parametrize(("fmt", "name"), IDS)
def test_reads_what_pyflink_wrote_as_pyflink_reads_it(fmt: str, name: str) -> None:
    case = _case(fmt, name)
    _, reader = cases.schemas(fmt, case)
    recorded = RECORDED[fmt][name]
    written = [base64.b64decode(w) for w in recorded["written"]]
    _assert_reads(case, reader, written, recorded["read"])


@pytest.mark.parametrize(("fmt", "name"), IDS)
def test_reads_messages_as_pyflink_reads_them(fmt: str, name: str) -> None:
    case = _case(fmt, name)
    _, reader = cases.schemas(fmt, case)
    given = case.get("messages", [])
    messages = [m.encode("utf-8") if fmt == "csv" else base64.b64decode(m) for m in given]
    _assert_reads(case, reader, messages, RECORDED[fmt][name]["read_messages"])


@pytest.mark.parametrize(("fmt", "name"), IDS)
def test_pyflink_reads_what_sparkpoint_writes(fmt: str, name: str) -> None:
    """The recording's input is what sparkpoint writes today, and PyFlink read it back as the
    rows PyFlink reads from its own bytes (the same bytes, compared above)."""
    case = _case(fmt, name)
    recorded = RECORDED[fmt][name]
    assert RECORDED["sparkpoint_written"][fmt][name] == WRITTEN_NOW[fmt][name]
    assert recorded["read_sparkpoint"] == recorded["read"]
    assert len(recorded["read_sparkpoint"]) == len(case["rows"])


def test_the_recording_covers_every_case_and_failure_kind() -> None:
    """The recording is PyFlink 2.3's, of every case, and has messages PyFlink refused."""
    assert RECORDED["apache-flink"] == "2.3.0"
    for fmt in ("avro", "csv"):
        assert sorted(RECORDED[fmt]) == sorted(c["name"] for c in CASES[fmt])
    refused = [
        r for c in RECORDED["csv"].values() for r in c["read_messages"] if isinstance(r, dict)
    ]
    skipped = [r for c in RECORDED["csv"].values() for r in c["read_messages"] if r is None]
    assert len(refused) >= 10 and len(skipped) >= 3
