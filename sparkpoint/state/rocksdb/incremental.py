"""Incremental RocksDB snapshots (Flink's ``RocksIncrementalSnapshotStrategy``) and their
download on restore.

Synchronous part: a RocksDB checkpoint of the committed state into a local directory (SST files
are hard links, ~ms). Asynchronous part: every SST file not yet uploaded by a *confirmed*
checkpoint goes to SHARED scope (one stream per file); SSTs the last confirmed checkpoint
uploaded are sent as ``PlaceholderStreamStateHandle`` (the shared-state registry swaps them for
the registered handle); MANIFEST/CURRENT/OPTIONS go as private EXCLUSIVE streams; a small meta
stream records max parallelism, key-group range and the state registry.

A keyed backend is re-created for every Spark task, so what was uploaded and confirmed is kept
in a sidecar file next to the database (``ledger.SstUploadLedger``), not in memory.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from sparkpoint.checkpoint.handles import (
    ByteStreamStateHandle,
    FileStateHandle,
    HandleAndLocalPath,
    IncrementalRemoteKeyedStateHandle,
    PlaceholderStreamStateHandle,
    RelativeFileStateHandle,
    StreamStateHandle,
    discard_quietly,
)
from sparkpoint.checkpoint.json_nesting import check_json_nesting
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.streams import CheckpointedStateScope, CheckpointStreamFactory
from sparkpoint.errors import CorruptStateError, RestoreError
from sparkpoint.state.rocksdb.ledger import SstUploadLedger

__all__ = [
    "IncrementalMeta",
    "download_handle",
    "read_incremental_meta",
    "upload_incremental",
]

_META_MAGIC = b"SPRKRDB1"
_CHUNK = 1 << 20
_SKIPPED_FILES = ("LOCK", "LOG")
_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclass(frozen=True)
class IncrementalMeta:
    """What the meta stream of an incremental handle records."""

    max_parallelism: int
    key_group_range: KeyGroupRange
    states: dict[str, int]

    def to_bytes(self) -> bytes:
        """Magic + JSON (no pickle in checkpoint data)."""
        body = {
            "max_parallelism": self.max_parallelism,
            "key_group_range": [
                self.key_group_range.start_key_group,
                self.key_group_range.end_key_group,
            ],
            "states": self.states,
        }
        return _META_MAGIC + json.dumps(body, sort_keys=True).encode("utf-8")


def read_incremental_meta(handle: IncrementalRemoteKeyedStateHandle) -> IncrementalMeta:
    """Decode the meta stream of ``handle``; ``RestoreError`` if missing or not ours."""
    data = _read_handle(handle.meta_state_handle)
    if not data.startswith(_META_MAGIC):
        raise RestoreError(
            f"The meta stream {_describe(handle.meta_state_handle)} of RocksDB checkpoint "
            f"{handle.checkpoint_id} is not a sparkpoint RocksDB meta stream"
        )
    try:
        text = data[len(_META_MAGIC) :]
        check_json_nesting(text)
        body = json.loads(text.decode("utf-8"))
        start, end = body["key_group_range"]
        return IncrementalMeta(
            int(body["max_parallelism"]), KeyGroupRange.of(start, end), dict(body["states"])
        )
    except (KeyError, TypeError, ValueError) as e:
        raise CorruptStateError(
            f"The meta stream {_describe(handle.meta_state_handle)} of RocksDB checkpoint "
            f"{handle.checkpoint_id} is corrupt: {e!r}"
        ) from None


def _upload_file(
    factory: CheckpointStreamFactory, path: str, scope: CheckpointedStateScope
) -> StreamStateHandle:
    stream = factory.create_checkpoint_state_output_stream(scope)
    try:
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                stream.write(chunk)
        handle = stream.close_and_get_handle()
    except BaseException:
        stream.close()
        raise
    if handle is None:
        # An empty file yields no handle; keep an inline empty one so restore recreates it.
        return ByteStreamStateHandle(f"empty-{uuid.uuid4().hex}", b"")
    return handle


def upload_incremental(
    checkpoint_dir: str,
    checkpoint_id: int,
    factory: CheckpointStreamFactory,
    ledger: SstUploadLedger,
    meta: IncrementalMeta,
    transfer_threads: int,
    reuse: bool = True,
) -> IncrementalRemoteKeyedStateHandle:
    """Upload a local RocksDB checkpoint directory: only SSTs not confirmed before, or, with
    ``reuse=False`` (a full checkpoint), every file."""
    confirmed = ledger.confirmed() if reuse else {}
    names = sorted(n for n in os.listdir(checkpoint_dir) if not n.startswith(_SKIPPED_FILES))
    shared: dict[str, StreamStateHandle] = {}
    to_upload: list[tuple[str, CheckpointedStateScope]] = []
    for name in names:
        if name.endswith(".sst"):
            previous = confirmed.get(name)
            size = os.path.getsize(os.path.join(checkpoint_dir, name))
            if previous is not None and previous.state_size == size:
                shared[name] = PlaceholderStreamStateHandle(
                    previous.physical_id, previous.state_size
                )
                continue
            to_upload.append((name, CheckpointedStateScope.SHARED))
        else:
            to_upload.append((name, CheckpointedStateScope.EXCLUSIVE))

    def upload(item: tuple[str, CheckpointedStateScope]) -> StreamStateHandle:
        name, scope = item
        return _upload_file(factory, os.path.join(checkpoint_dir, name), scope)

    uploaded_handles = _upload_all(upload, to_upload, transfer_threads)
    private: dict[str, StreamStateHandle] = {}
    new_shared: dict[str, StreamStateHandle] = {}
    for (name, scope), handle in zip(to_upload, uploaded_handles):
        if scope is CheckpointedStateScope.SHARED:
            new_shared[name] = handle
        else:
            private[name] = handle
    meta_stream = factory.create_checkpoint_state_output_stream(CheckpointedStateScope.EXCLUSIVE)
    try:
        meta_stream.write(meta.to_bytes())
        meta_handle = meta_stream.close_and_get_handle()
    except BaseException:
        meta_stream.close()
        # Nothing references this upload's files: leave none behind in shared/.
        discard_quietly(uploaded_handles)
        raise
    assert meta_handle is not None
    # The ledger keeps real handles (placeholders stand for the confirmed ones).
    ledger.record(
        checkpoint_id, {**{n: confirmed[n] for n in shared}, **new_shared}, full=not reuse
    )
    shared.update(new_shared)
    checkpointed = meta_handle.state_size + sum(h.state_size for h in new_shared.values())
    checkpointed += sum(h.state_size for h in private.values())
    return IncrementalRemoteKeyedStateHandle(
        backend_identifier=ledger.backend_identifier,
        range=meta.key_group_range,
        checkpoint_id=checkpoint_id,
        shared_state=tuple(HandleAndLocalPath(h, n) for n, h in sorted(shared.items())),
        private_state=tuple(HandleAndLocalPath(h, n) for n, h in sorted(private.items())),
        meta_state_handle=meta_handle,
        checkpointed_size=checkpointed,
        state_handle_id=uuid.uuid4().hex,
    )


def _upload_all(
    fn: Callable[[_T], StreamStateHandle], items: Sequence[_T], threads: int
) -> list[StreamStateHandle]:
    """Upload every item; if one fails, discard the files already written and re-raise
    (a failed checkpoint leaves nothing behind in ``shared/``)."""
    done: list[StreamStateHandle] = []
    errors: list[BaseException] = []

    def guarded(item: _T) -> StreamStateHandle | None:
        if errors:
            return None
        try:
            handle = fn(item)
        except BaseException as exc:
            errors.append(exc)
            return None
        done.append(handle)
        return handle

    results = _run_all(guarded, items, threads)
    if errors:
        discard_quietly(done)
        raise errors[0]
    return [h for h in results if h is not None]


def _describe(handle: StreamStateHandle) -> str:
    path = getattr(handle, "path", None)
    if path is not None:
        return str(path)
    try:
        return handle.physical_id
    except TypeError:
        return repr(handle)


def _read_handle(handle: StreamStateHandle) -> bytes:
    try:
        return handle.read_all()
    except FileNotFoundError as exc:
        raise RestoreError(f"Missing state file {_describe(handle)}: {exc}") from exc
    except TypeError as exc:
        raise RestoreError(str(exc)) from exc
    except OSError as exc:
        raise RestoreError(f"Cannot read state file {_describe(handle)}: {exc}") from exc


def _local_path(handle: StreamStateHandle) -> str | None:
    """The OS path of a file handle on the local filesystem (kernel copy), else None."""
    path = getattr(handle, "path", None)
    if not isinstance(path, str) or type(handle) not in (FileStateHandle, RelativeFileStateHandle):
        return None
    if path.startswith("file://"):
        return path[len("file://") :]
    return None if "://" in path else path


def _download_file(handle: StreamStateHandle, target: str) -> None:
    inline = handle.as_bytes_if_in_memory()
    local = _local_path(handle)
    try:
        if inline is not None:
            with open(target, "wb") as out:
                out.write(inline)
            return
        if isinstance(handle, FileStateHandle) and handle.digest is not None:
            handle.copy_to_local(target)  # verified while copied
            return
        if local is not None:
            shutil.copyfile(local, target)
            return
        with handle.open_input_stream() as src, open(target, "wb") as out:
            shutil.copyfileobj(src, out, _CHUNK)
    except FileNotFoundError as exc:
        raise RestoreError(f"Missing state file {_describe(handle)}: {exc}") from exc
    except TypeError as exc:
        raise RestoreError(str(exc)) from exc


def download_handle(
    handle: IncrementalRemoteKeyedStateHandle, target_dir: str, transfer_threads: int
) -> None:
    """Download every shared and private file of ``handle`` into a fresh ``target_dir``."""
    if os.path.exists(target_dir):
        shutil.rmtree(target_dir)
    os.makedirs(target_dir)
    items = [*handle.shared_state, *handle.private_state]

    def fetch(item: HandleAndLocalPath) -> None:
        _download_file(item.handle, os.path.join(target_dir, item.local_path))

    try:
        _run_all(fetch, items, transfer_threads)
    except BaseException:
        shutil.rmtree(target_dir, ignore_errors=True)
        raise


def _run_all(fn: Callable[[_T], _R], items: Sequence[_T], threads: int) -> list[_R]:
    """``[fn(x) for x in items]`` on up to ``threads`` threads (in order; first error wins)."""
    if threads <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(threads, len(items))) as pool:
        return list(pool.map(fn, items))
