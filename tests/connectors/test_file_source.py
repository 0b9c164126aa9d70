"""``FileSource`` on Spark: static file sets read exactly once across epochs, JSON lines,
CSV and Parquet records, continuous monitoring that picks up new files, clear errors."""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkpoint.common import Configuration, Duration, Encoder, JobStatus, Row, Types
from sparkpoint.datastream.connectors.file_system import FileSink, FileSource, StreamFormat

# Byte ranges of a text split are ``max-records-per-split * 64`` bytes (file_source.py).
RANGE_BYTES = 2 * 64


def _small_epochs(env: Any) -> None:
    """Two records (128 bytes of a line file) per split per epoch: ranges cut lines."""
    env.configure(Configuration().set_string("sparkpoint.epoch.max-records-per-split", "2"))


def _write(path: Path, data: str, newline: str = "\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.replace("\n", newline).encode("utf-8"))


def _text_files(base: Path) -> dict[str, list[str]]:
    """Three files plus a nested one; lines of varied length, empty lines, UTF-8, CRLF."""
    files = {
        "a.txt": [f"a{i:02d} " + "x" * (7 * i % 53) for i in range(24)],
        "b.txt": ["", "élan vital", "日本語のテキスト" * 5, "", "short", "y" * 150, "end"],
        "nested/c.log": [f"c-{i}" + "z" * (i * 11) for i in range(10)],
        "crlf.txt": [f"crlf line {i} " + "w" * 40 for i in range(6)],
    }
    for name, lines in files.items():
        body = "\n".join(lines)
        if name != "b.txt":  # b.txt has no trailing line break
            body += "\n"
        _write(base / name, body, "\r\n" if name == "crlf.txt" else "\n")
    # Hidden and underscore files are not data (as in Flink's file enumeration).
    _write(base / ".hidden", "never read\n")
    _write(base / "_SUCCESS", "")
    return files


def _cut_lines(path: Path) -> int:
    """How many lines of the file span a range boundary (start and end in different ranges)."""
    data = path.read_bytes()
    cut, start = 0, 0
    for line in data.splitlines(keepends=True):
        end = start + len(line)
        if start // RANGE_BYTES != (end - 1) // RANGE_BYTES:
            cut += 1
        start = end
    return cut


def test_static_text_directory_reads_every_line_exactly_once(env: Any, tmp_path: Path) -> None:
    base = tmp_path / "in"
    files = _text_files(base)
    assert sum(_cut_lines(base / n) for n in files) >= 5  # the ranges really cut lines
    _small_epochs(env)
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(base))
        .process_static_file_set()
        .build()
    )
    ds = env.from_source(source, None, "text")
    out = list(ds.execute_and_collect())
    expected = [line for lines in files.values() for line in lines]
    assert Counter(out) == Counter(expected)
    assert len(out) == len(expected) == 47
    # Within one file, lines come in file order.
    assert [x for x in out if x.startswith("a")] == files["a.txt"]
    assert [x for x in out if x.startswith("crlf")] == files["crlf.txt"]


def test_static_text_file_runs_many_epochs(env: Any, tmp_path: Path) -> None:
    path = tmp_path / "one.txt"
    lines = [f"{i}:" + "q" * (i % 37) for i in range(40)]
    _write(path, "\n".join(lines) + "\n")
    size = path.stat().st_size
    _small_epochs(env)
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(path)).build()
    env.from_source(source, None, "text").map(lambda s: s.upper()).sink_to(
        FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder()).build()
    )
    result = env.execute("many-epochs")
    assert result.epochs == -(-size // RANGE_BYTES)  # one range of the only split per epoch
    assert result.records_in == 40
    assert _read_lines(tmp_path / "out") == [s.upper() for s in lines]


def test_json_lines_are_dicts(env: Any, tmp_path: Path) -> None:
    base = tmp_path / "json"
    docs = [{"id": i, "name": f"n{i}", "tags": ["t"] * (i % 3), "v": i / 4} for i in range(12)]
    _write(base / "p0.jsonl", "\n".join(json.dumps(d) for d in docs[:7]) + "\n\n")
    _write(base / "p1.jsonl", "\n".join(json.dumps(d) for d in docs[7:]))
    _small_epochs(env)
    source = FileSource.for_record_stream_format(
        StreamFormat.json_lines_format(), str(base)
    ).build()
    out = list(env.from_source(source, None, "json").execute_and_collect())
    assert all(isinstance(d, dict) for d in out)
    assert sorted(out, key=lambda d: d["id"]) == docs


def test_csv_records_are_named_rows(env: Any, tmp_path: Path) -> None:
    base = tmp_path / "csv"
    _write(base / "x.csv", "id,name,score\n1,ann,1.5\n2,bob,2.25\n3,cy,-0.5\n")
    _write(base / "y.csv", "id,name,score\n4,dee,10.0\n5,eve,0.125\n")
    _small_epochs(env)
    source = FileSource.for_record_stream_format(StreamFormat.csv_format(), str(base)).build()
    out = list(
        env.from_source(source, None, "csv")
        .map(lambda r: Row(id=r.id, name=r["name"].upper(), score=r.score * 2))
        .execute_and_collect()
    )
    assert sorted(out, key=lambda r: r.id) == [
        Row(id=1, name="ANN", score=3.0),
        Row(id=2, name="BOB", score=4.5),
        Row(id=3, name="CY", score=-1.0),
        Row(id=4, name="DEE", score=20.0),
        Row(id=5, name="EVE", score=0.25),
    ]


def test_parquet_records_are_named_rows(env: Any, tmp_path: Path) -> None:
    base = tmp_path / "pq"
    base.mkdir()
    pq.write_table(
        pa.table({"k": ["a", "b", "a", "c", "b"], "n": [1, 2, 3, 4, 5]}), base / "part-0.parquet"
    )
    pq.write_table(pa.table({"k": ["c", "a"], "n": [60, 70]}), base / "part-1.parquet")
    _small_epochs(env)
    source = FileSource.for_record_stream_format(StreamFormat.parquet_format(), str(base)).build()
    rows = env.from_source(source, None, "parquet")
    out = list(rows.key_by(lambda r: r.k).sum("n").execute_and_collect())
    finals: dict[str, Row] = {}
    for r in out:
        assert r.get_field_names() == ["k", "n"]
        finals[r.k] = r
    assert finals == {
        "a": Row(k="a", n=74),
        "b": Row(k="b", n=7),
        "c": Row(k="c", n=64),
    }
    assert len(out) == 7  # one rolling sum per input record


def test_read_text_file(env: Any, tmp_path: Path) -> None:
    _write(tmp_path / "d" / "one.txt", "hello world\nbye\n")
    _write(tmp_path / "d" / "two.txt", "third line\n")
    single = list(env.read_text_file(str(tmp_path / "d" / "one.txt")).execute_and_collect())
    assert single == ["hello world", "bye"]
    both = env.read_text_file(str(tmp_path / "d")).flat_map(lambda s: s.split())
    assert sorted(both.execute_and_collect()) == ["bye", "hello", "line", "third", "world"]


def test_missing_path_is_a_clear_error(env: Any, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), missing).build()
    env.from_source(source, None, "missing").print()
    message = re.escape(f"FileSource path does not exist: {missing}")
    with pytest.raises(FileNotFoundError, match=message):
        env.execute("missing")


def test_builder_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="at least one path"):
        FileSource.for_record_stream_format(StreamFormat.text_line_format())
    builder = FileSource.for_record_stream_format(StreamFormat.text_line_format(), "/x")
    with pytest.raises(ValueError, match="discovery interval must be positive"):
        builder.monitor_continuously(Duration.of_millis(0))


def _natural(name: str) -> list[Any]:
    """Sort key putting ``part-x-0-10-0`` after ``part-x-0-9-0`` (epochs in order)."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _read_lines(out_dir: Path) -> list[str]:
    """Committed lines of a FileSink directory, part files in name order."""
    lines: list[str] = []
    if not out_dir.is_dir():
        return lines
    for name in sorted(os.listdir(out_dir), key=_natural):
        path = out_dir / name
        if name.startswith(".") or path.is_dir():
            continue
        lines.extend(path.read_text().splitlines())
    return lines


def _wait_for(predicate: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the condition")
        time.sleep(0.2)


def _add_file(directory: Path, name: str, lines: list[str]) -> None:
    """Write a file under a hidden name, then rename it: files appear complete."""
    tmp = directory / f".{name}.tmp"
    tmp.write_text("".join(f"{line}\n" for line in lines))
    os.replace(tmp, directory / name)


def test_monitor_continuously_picks_up_new_files(env: Any, tmp_path: Path) -> None:
    watched = tmp_path / "watched"
    watched.mkdir()
    out_dir = tmp_path / "out"
    first = [f"first-{i}" for i in range(5)]
    _add_file(watched, "f1.txt", first)
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(watched))
        .monitor_continuously(Duration.of_millis(100))
        .build()
    )
    assert source.get_boundedness() == "CONTINUOUS_UNBOUNDED"
    env.from_source(source, None, "watched").map(lambda s: s + "!").sink_to(
        FileSink.for_row_format(str(out_dir), Encoder.simple_string_encoder()).build()
    )
    client = env.execute_async("monitor")
    try:
        _wait_for(lambda: len(_read_lines(out_dir)) >= 5)
        second = [f"second-{i}" for i in range(3)]
        third = [f"third-{i}" for i in range(4)]
        _add_file(watched, "f2.txt", second)
        _add_file(watched, "sub-f3.txt", third)
        _wait_for(lambda: len(_read_lines(out_dir)) >= 12)
        assert client.get_job_status().result() is JobStatus.RUNNING
    finally:
        client.cancel().result(timeout=60)
        client.wait(timeout=120)
    assert client.get_job_status().result() is JobStatus.CANCELED
    assert Counter(_read_lines(out_dir)) == Counter(s + "!" for s in first + second + third)


def test_string_encoder_writes_java_strings_of_declared_types() -> None:
    encode = Encoder.simple_string_encoder().encode
    row_type = Types.ROW([Types.STRING(), Types.INT()])
    assert encode(Row("a", 1), row_type) == b"+I[a, 1]\n"
    assert encode(("b", None), row_type) == b"+I[b, null]\n"
    assert encode(("c", True), Types.TUPLE([Types.STRING(), Types.BOOLEAN()])) == b"(c,true)\n"
    assert encode(("d", 2)) == b"('d', 2)\n"  # untyped: Python's str, as PyFlink
    assert encode("é", None) == "é\n".encode()
