"""Heap checkpoints copied from a local commit's files: the synchronous part hard-links the
commit's files, the upload writes them as ``pickle-chain`` key-group blocks (each group's
whole-group block and its deltas, as written), so no state is encoded again."""

from __future__ import annotations

import os
import pickle
import shutil
from collections.abc import Callable, Mapping
from typing import Any

from sparkpoint.checkpoint.handles import KeyedStateHandle
from sparkpoint.checkpoint.streams import CheckpointStreamFactory
from sparkpoint.state.heap.commit_files import link_or_copy
from sparkpoint.state.snapshot_format import SnapshotHeader, chain_block, write_key_groups_snapshot

__all__ = ["snapshot_commit_files"]


def snapshot_commit_files(
    state_dir: str,
    links: str,
    commit: Mapping[str, Any],
    header: SnapshotHeader,
    stream_factory: CheckpointStreamFactory,
) -> Callable[[], KeyedStateHandle | None]:
    """Hard-link the files of ``commit`` (in ``state_dir``) into the new directory ``links``
    now (later commits delete them); the returned upload writes the snapshot and removes
    ``links``."""
    os.makedirs(links)
    files: dict[int, tuple[str, list[str | None]]] = {
        int(kg): (fname, names) for kg, (fname, names) in commit["files"].items()
    }
    delta_files: list[tuple[str, list[int]]] = [
        (fname, list(kgs)) for fname, kgs in commit.get("deltas") or []
    ]
    try:
        for fname in {f for f, _ in files.values()} | {f for f, _ in delta_files}:
            link_or_copy(os.path.join(state_dir, fname), os.path.join(links, fname))
    except BaseException:
        shutil.rmtree(links, ignore_errors=True)
        raise

    def read(fname: str) -> bytes:
        with open(os.path.join(links, fname), "rb") as f:
            return f.read()

    def upload() -> KeyedStateHandle | None:
        try:
            deltas: dict[int, list[bytes]] = {}
            for fname, kgs in delta_files:
                per_group = pickle.loads(read(fname))
                for kg in kgs:
                    deltas.setdefault(kg, []).append(per_group[kg])

            def block_of(kg: int) -> bytes | None:
                entry = files.get(kg)
                if entry is None:  # an empty key group (deltas only follow a file)
                    return None
                fname, names = entry
                return chain_block(names, read(fname), deltas.get(kg, ()))

            out = stream_factory.create_checkpoint_state_output_stream()
            return write_key_groups_snapshot(out, header, block_of)
        finally:
            shutil.rmtree(links, ignore_errors=True)

    return upload
