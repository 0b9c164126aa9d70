"""Restore-time bulk loading: entries go into sorted SST files that RocksDB ingests.

Writing a restored snapshot through memtables would flush and then compact every byte again
(level 0 -> level 1 ...). Here the entries are buffered per key group, and whenever the buffer
passes a size at a key-group boundary they are sorted, written with ``SstFileWriter`` and
ingested (moved, not copied). Key groups arrive whole and in order from a key-groups snapshot
or a database scan, so the files rarely overlap; when they do, each file is ingested on its
own and a later one wins, exactly as later writes would.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterable

import rocksdict

__all__ = ["BulkLoader"]

_FLUSH_BYTES = 64 << 20


class BulkLoader:
    """Collects ``(key, value)`` pairs and ingests them into a database as SST files."""

    def __init__(
        self,
        directory: str,
        options_factory: Callable[[], rocksdict.Options],
        ingest: Callable[[str], None],
        flush_bytes: int = _FLUSH_BYTES,
    ) -> None:
        self._dir = directory
        self._options_factory = options_factory
        self._ingest = ingest
        self._flush_bytes = flush_bytes
        self._groups: dict[bytes, list[tuple[bytes, bytes]]] = {}
        self._current: bytes | None = None
        self._size = 0
        self.files_ingested = 0
        os.makedirs(directory, exist_ok=True)

    def add(self, items: Iterable[tuple[bytes, bytes]]) -> int:
        """Buffer entries (flushing at key-group boundaries); returns how many were added."""
        count = 0
        groups = self._groups
        for key, value in items:
            group = key[:2]
            if group != self._current:
                if self._size >= self._flush_bytes:
                    self._write_out()
                    groups = self._groups  # _write_out starts a new buffer
                self._current = group
                groups.setdefault(group, [])
            groups[group].append((key, value))
            self._size += len(key) + len(value)
            count += 1
        return count

    def _write_out(self) -> None:
        """Write every buffered key group, sorted, into one SST file and ingest it."""
        if not self._groups:
            return
        path = os.path.join(self._dir, f"bulk-{uuid.uuid4().hex}.sst")
        writer = rocksdict.SstFileWriter(self._options_factory())
        writer.open(path)
        written = 0
        for group in sorted(self._groups):
            entries = self._groups[group]
            entries.sort(key=lambda e: e[0])  # stable: of equal keys the last one stays last
            last = len(entries) - 1
            for i, (key, value) in enumerate(entries):
                if i < last and entries[i + 1][0] == key:
                    continue  # a later write of the same key wins
                writer[key] = value
                written += 1
        if written:
            writer.finish()
            self._ingest(path)
            self.files_ingested += 1
        self._groups = {}
        self._current = None
        self._size = 0

    def finish(self) -> None:
        """Ingest what is still buffered and remove the working directory."""
        try:
            self._write_out()
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)

    def abort(self) -> None:
        """Drop buffered entries and the working directory."""
        self._groups = {}
        shutil.rmtree(self._dir, ignore_errors=True)
