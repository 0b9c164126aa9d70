"""``FileSource``: text lines, JSON lines, CSV or Parquet files of a directory, new files too.

Each file is a split. Text and JSON-lines splits are read by byte range (a line belongs to
the range it starts in, as Hadoop's line reader does); CSV and Parquet splits by row index.
Files are assumed immutable once visible, as Flink's file source assumes.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sparkpoint.checkpoint.paths import comparable_path, path_below
from sparkpoint.connectors.source import Boundedness, Source, SourceSplit, SplitRange
from sparkpoint.errors import UnsafeStatePathError
from sparkpoint.fs import get_filesystem

__all__ = ["FileSource", "FileSourceBuilder", "StreamFormat"]

_AVG_LINE_BYTES = 64


@dataclass(frozen=True)
class StreamFormat:
    """How a file's bytes become records."""

    kind: str
    encoding: str = "utf-8"

    @staticmethod
    def text_line_format(charset_name: str = "UTF-8") -> StreamFormat:
        """One string per line (without the line break), like PyFlink's."""
        return StreamFormat("text", charset_name.lower())

    @staticmethod
    def json_lines_format() -> StreamFormat:
        """One JSON document per line, as a dict."""
        return StreamFormat("json")

    @staticmethod
    def csv_format() -> StreamFormat:
        """CSV with a header row; each record a ``Row`` with the header's field names."""
        return StreamFormat("csv")

    @staticmethod
    def parquet_format() -> StreamFormat:
        """Parquet; each record a ``Row`` with the file's column names."""
        return StreamFormat("parquet")

    @property
    def by_bytes(self) -> bool:
        """Whether splits are read by byte range (line formats) rather than row index."""
        return self.kind in ("text", "json")


class FileSource(Source):
    """Reads the files under one or more paths; with monitoring, picks up new files."""

    def __init__(
        self, stream_format: StreamFormat, paths: tuple[str, ...], monitor_interval_ms: int | None
    ) -> None:
        self.format = stream_format
        self.paths = paths
        self.monitor_interval_ms = monitor_interval_ms

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: str) -> FileSourceBuilder:
        """A builder for a source reading records of ``stream_format`` from ``paths``."""
        if not paths:
            raise ValueError("FileSource needs at least one path")
        return FileSourceBuilder(stream_format, tuple(str(p) for p in paths))

    def get_boundedness(self) -> str:
        if self.monitor_interval_ms is None:
            return Boundedness.BOUNDED
        return Boundedness.CONTINUOUS_UNBOUNDED

    def _list_files(self) -> list[tuple[str, int]]:
        found: list[tuple[str, int]] = []
        for base in self.paths:
            fs = get_filesystem(base)
            if not fs.exists(base):
                if self.monitor_interval_ms is None:
                    raise FileNotFoundError(f"FileSource path does not exist: {base}")
                continue
            if fs.is_dir(base):
                for info in fs.list(base, recursive=True):
                    name = info.path.rstrip("/").rpartition("/")[2]
                    if info.is_dir or name.startswith((".", "_")):
                        continue
                    found.append((info.path, info.size))
            else:
                found.append((base, fs.size(base)))
        return sorted(found)

    def check_restored_splits(self, splits: Any, where: str, field: str) -> None:
        """A restored split must be one of the configured files or a visible file below a
        configured directory: a crafted snapshot cannot make the job read another file."""
        for i, split in enumerate(splits):
            self._check_restored_path(split["split_id"], where, f"{field}[{i}].split_id")

    def _check_restored_path(self, path: str, where: str, field: str) -> None:
        if any(comparable_path(path) == comparable_path(p) for p in self.paths):
            return
        reasons = []
        for base in self.paths:
            try:
                below = path_below(path, base)
            except ValueError as e:
                reasons.append(str(e))
                continue
            if not below.rpartition("/")[2].startswith((".", "_")):
                return
            reasons.append(f"is a hidden file below {base}")
        raise UnsafeStatePathError(
            f"Refusing the file source's split id {path!r} in {where}, {field}: it "
            f"{'; it '.join(reasons) or 'names no configured path'}. A restored split must "
            f"be a file of the source's paths ({', '.join(self.paths)})."
        )

    def discover_splits(self, parallelism: int, known: dict[str, SourceSplit]) -> list[SourceSplit]:
        new = []
        for path, size in self._list_files():
            if path in known:
                continue
            if self.format.by_bytes:
                new.append(SourceSplit(path, 0, size))
            else:
                new.append(SourceSplit(path, 0, self._row_count(path)))
        return new

    def _row_count(self, path: str) -> int:
        return _read_table(self.format, path).num_rows

    def next_range(self, split: SourceSplit, max_records: int) -> SplitRange | None:
        if split.position >= split.end:
            return SplitRange(split.split_id, split.position, split.end, {}, True)
        step = max_records * _AVG_LINE_BYTES if self.format.by_bytes else max_records
        hi = min(split.position + step, split.end)
        return SplitRange(split.split_id, split.position, hi, {}, hi >= split.end)

    def read(self, split_range: SplitRange) -> Iterator[Any]:
        if self.format.by_bytes:
            return self._read_lines(split_range)
        table = _read_table(self.format, split_range.split_id)
        part = table.slice(split_range.start, split_range.end - split_range.start)
        from sparkpoint.types import Row

        names = part.column_names
        return (Row(**dict(zip(names, vals))) for vals in zip(*part.to_pydict().values()))

    def _read_lines(self, split_range: SplitRange) -> Iterator[Any]:
        fs = get_filesystem(split_range.split_id)
        start, end = split_range.start, split_range.end
        with fs.open_input(split_range.split_id) as stream:
            pos = start
            if start > 0:
                # The line that started before ``start`` belongs to the previous range.
                stream.seek(start - 1)
                pos = start - 1 + len(stream.readline())
            else:
                stream.seek(0)
            decode = self.format.encoding
            as_json = self.format.kind == "json"
            while pos < end:
                line = stream.readline()
                if not line:
                    break
                pos += len(line)
                text = line.decode(decode).rstrip("\r\n")
                if as_json:
                    if text.strip():
                        yield json.loads(text)
                else:
                    yield text


def _read_table(stream_format: StreamFormat, path: str) -> Any:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    fs = get_filesystem(path)
    with fs.open_input(path) as f:
        data = f.read()
    if stream_format.kind == "parquet":
        return pq.read_table(io.BytesIO(data))
    return pacsv.read_csv(io.BytesIO(data))


class FileSourceBuilder:
    """PyFlink's ``FileSourceBuilder``: static file set (bounded) or continuous monitoring."""

    def __init__(self, stream_format: StreamFormat, paths: tuple[str, ...]) -> None:
        self._format = stream_format
        self._paths = paths
        self._monitor: int | None = None

    def monitor_continuously(self, discovery_interval: Any) -> FileSourceBuilder:
        """Keep watching the paths for new files (an unbounded source)."""
        ms = (
            discovery_interval.to_milliseconds()
            if hasattr(discovery_interval, "to_milliseconds")
            else int(discovery_interval)
        )
        if ms <= 0:
            raise ValueError("discovery interval must be positive")
        self._monitor = ms
        return self

    def process_static_file_set(self) -> FileSourceBuilder:
        """Read the files present now, then finish (a bounded source)."""
        self._monitor = None
        return self

    def build(self) -> FileSource:
        """The configured source."""
        return FileSource(self._format, self._paths, self._monitor)
