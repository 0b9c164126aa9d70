"""``FileSink``: exactly-once part files, visible only once their checkpoint completes.

Each task writes its epoch's records to a hidden in-progress file
(``<base>/.inprogress/<job>/<part name>.<attempt>.<uuid>``); the committable names it and
the final part file. Commit renames; a part file that already exists is left alone
(idempotent redo after a driver crash), and abort deletes the in-progress file.

A restored snapshot's committables are input from outside: every staged path must be a file
``<base>/.inprogress/<job>/<name>`` and every final path a part file ``<base>/<name>`` of this
sink, checked before anything is renamed, so a crafted ``_metadata`` cannot move or plant a
file elsewhere.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sparkpoint.checkpoint.paths import path_below
from sparkpoint.connectors.sink import Sink, SinkWriter, java_string
from sparkpoint.errors import UnsafeStatePathError
from sparkpoint.fs import get_filesystem

__all__ = ["Encoder", "FileSink", "FileSinkBuilder", "OutputFileConfig", "RollingPolicy"]


@dataclass(frozen=True)
class Encoder:
    """How a record becomes bytes in a row-format file."""

    charset: str = "utf-8"

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> Encoder:
        """The record's string form and a newline, like Flink's SimpleStringEncoder."""
        return Encoder(charset_name.lower())

    def encode(self, value: Any, type_info: Any = None) -> bytes:
        """One record, newline-terminated."""
        return (java_string(value, type_info) + "\n").encode(self.charset)


@dataclass(frozen=True)
class OutputFileConfig:
    """Part file prefix and suffix (``part`` and ``""`` by default)."""

    part_prefix: str = "part"
    part_suffix: str = ""

    @staticmethod
    def builder() -> OutputFileConfigBuilder:
        """PyFlink's builder."""
        return OutputFileConfigBuilder()

    def get_part_prefix(self) -> str:
        return self.part_prefix

    def get_part_suffix(self) -> str:
        return self.part_suffix


class OutputFileConfigBuilder:
    """Builds an ``OutputFileConfig``."""

    def __init__(self) -> None:
        self._prefix = "part"
        self._suffix = ""

    def with_part_prefix(self, prefix: str) -> OutputFileConfigBuilder:
        self._prefix = prefix
        return self

    def with_part_suffix(self, suffix: str) -> OutputFileConfigBuilder:
        self._suffix = suffix
        return self

    def build(self) -> OutputFileConfig:
        return OutputFileConfig(self._prefix, self._suffix)


@dataclass(frozen=True)
class RollingPolicy:
    """When to start a new part file. Every checkpoint (epoch commit) always rolls, as in
    Flink's ``OnCheckpointRollingPolicy``; ``max_part_size`` rolls earlier within an epoch."""

    max_part_size: int = 128 * 1024 * 1024

    @staticmethod
    def default_rolling_policy(
        part_size: int = 128 * 1024 * 1024,
        rollover_interval: int = 60 * 1000,
        inactivity_interval: int = 60 * 1000,
    ) -> RollingPolicy:
        if part_size <= 0:
            raise ValueError("part_size must be positive")
        return RollingPolicy(part_size)

    @staticmethod
    def on_checkpoint_rolling_policy() -> RollingPolicy:
        return RollingPolicy()


class _FileWriter(SinkWriter):
    def __init__(self, sink: FileSink, job_id: str, epoch: int, subtask: int, attempt: int):
        self._sink = sink
        self._fs = get_filesystem(sink.base_path)
        self._prefix = f"{sink.config.part_prefix}-{job_id[:8]}-{subtask}-{epoch}"
        self._attempt = attempt
        self._job = job_id
        self._parts: list[tuple[str, str]] = []
        self._out: Any = None
        self._size = 0

    def _open(self) -> None:
        idx = len(self._parts)
        base = self._sink.base_path.rstrip("/")
        final = f"{base}/{self._prefix}-{idx}{self._sink.config.part_suffix}"
        staged = (
            f"{self._sink.base_path.rstrip('/')}/.inprogress/{self._job}/"
            f"{self._prefix}-{idx}.{self._attempt}.{uuid.uuid4().hex}"
        )
        self._fs.mkdirs(self._fs.parent(staged))
        self._out = self._fs.open_output(staged)
        self._parts.append((staged, final))
        self._size = 0

    def write(self, values: list[Any]) -> None:
        enc = self._sink.encoder.encode
        ti = self._sink.type_info
        data = b"".join(enc(v, ti) for v in values)
        if not data:
            return
        if self._out is None or self._size >= self._sink.rolling_policy.max_part_size:
            self._close_current()
            self._open()
        self._out.write(data)
        self._size += len(data)

    def _close_current(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None

    def prepare_commit(self) -> list[Any]:
        self._close_current()
        return list(self._parts)


class FileSink(Sink):
    """Row-format file sink with exactly-once part files."""

    def __init__(
        self,
        base_path: str,
        encoder: Encoder,
        config: OutputFileConfig,
        rolling_policy: RollingPolicy,
        type_info: Any = None,
    ) -> None:
        self.base_path = base_path
        self.encoder = encoder
        self.config = config
        self.rolling_policy = rolling_policy
        self.type_info = type_info

    @staticmethod
    def for_row_format(base_path: str, encoder: Encoder) -> FileSinkBuilder:
        """A builder for a sink writing ``encoder``-encoded rows under ``base_path``."""
        if not base_path:
            raise ValueError("FileSink needs a base path")
        return FileSinkBuilder(str(base_path), encoder)

    def create_writer(
        self, job_id: str, epoch: int, subtask_index: int, parallelism: int, attempt: int
    ) -> SinkWriter:
        return _FileWriter(self, job_id, epoch, subtask_index, attempt)

    def check_restored(
        self, committables: Sequence[Any], job_id: str, where: str, *, trusted: bool = True
    ) -> None:
        """Refuse (``UnsafeStatePathError``) any committable whose staged file is not in the
        in-progress directory of job ``job_id`` (the restoring job's, never one an untrusted
        snapshot states) or whose part file is not in the base path."""
        self._check(committables, job_id, where)

    def _check(self, committables: Sequence[Any], job_id: str | None, where: str) -> None:
        base = self.base_path.rstrip("/") or self.base_path
        inprogress = f"{base}/.inprogress"
        for i, committable in enumerate(committables):
            field = f"committable {i}"
            if not (isinstance(committable, (list, tuple)) and len(committable) == 2):
                raise _refuse(where, field, committable, "is not a [staged, final] pair")
            staged, final = committable
            try:
                job, _, name = path_below(staged, inprogress).partition("/")
            except ValueError as e:
                raise _refuse(where, f"{field} staged path", staged, str(e)) from None
            if not name or "/" in name:
                raise _refuse(
                    where, f"{field} staged path", staged, f"is not a file of {inprogress}/<job>/"
                )
            try:
                part = path_below(final, base)
            except ValueError as e:
                raise _refuse(where, f"{field} final path", final, str(e)) from None
            if "/" in part or not part.startswith(self.config.part_prefix) or part[0] in "._":
                raise _refuse(where, f"{field} final path", final, f"is not a part file of {base}/")
            if job_id is not None and job != job_id:
                own = f"is not a file of {inprogress}/{job_id}/"
                raise _refuse(where, f"{field} staged path", staged, own)

    def commit(self, committables: Sequence[Any]) -> None:
        """Rename each staged file to its part file, after checking every pair."""
        self._check(committables, None, f"the commit of the file sink at {self.base_path}")
        fs = get_filesystem(self.base_path)
        for staged, final in committables:
            if fs.exists(final):
                continue
            fs.rename(staged, final)

    def abort(self, committables: Sequence[Any]) -> None:
        fs = get_filesystem(self.base_path)
        for staged, _final in committables:
            fs.delete(staged)

    def cleanup_job(self, job_id: str) -> None:
        """Remove the job's in-progress directory (left-overs of failed attempts)."""
        fs = get_filesystem(self.base_path)
        fs.delete(f"{self.base_path.rstrip('/')}/.inprogress/{job_id}", recursive=True)


def _refuse(where: str, field: str, value: Any, reason: str) -> UnsafeStatePathError:
    return UnsafeStatePathError(
        f"Refusing the file sink's {field} {value!r} in {where}: it {reason}. A restored "
        "snapshot's sink commits must lie in the sink's own directories (a sink whose base "
        "path changed since the snapshot cannot redo them: restore with the base path the "
        "snapshot was taken with)."
    )


class FileSinkBuilder:
    """PyFlink's ``RowFormatBuilder``."""

    def __init__(self, base_path: str, encoder: Encoder) -> None:
        self._base = base_path
        self._encoder = encoder
        self._config = OutputFileConfig()
        self._rolling = RollingPolicy()

    def with_output_file_config(self, config: OutputFileConfig) -> FileSinkBuilder:
        self._config = config
        return self

    def with_rolling_policy(self, policy: RollingPolicy) -> FileSinkBuilder:
        self._rolling = policy
        return self

    def with_bucket_check_interval(self, interval: int) -> FileSinkBuilder:
        return self

    def build(self) -> FileSink:
        return FileSink(self._base, self._encoder, self._config, self._rolling)
