"""The CLI's snapshot-trust options: ``--signing-key-file`` (refuse snapshots not signed with
that key) and ``--no-pickle`` (read pickled state as plain data only), applied to the whole
process before a command reads anything (``docs/storage.md``)."""

from __future__ import annotations

import argparse
from typing import Any

from sparkpoint.checkpoint.trust import SnapshotTrust, read_key_file, use_by_default
from sparkpoint.state.pickling import set_allow_pickle

__all__ = ["add_trust_arguments", "apply_trust_arguments"]


def add_trust_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the options on the top-level parser (they go before the command)."""
    parser.add_argument(
        "--signing-key-file",
        metavar="PATH",
        default=None,
        help="refuse snapshots whose _metadata is not signed with the key in PATH "
        "(sparkpoint.snapshot.signing-key-file)",
    )
    parser.add_argument(
        "--no-pickle",
        action="store_true",
        help="never unpickle code from a snapshot: pickled state is read as plain data only "
        "(sparkpoint.snapshot.allow-pickle=false)",
    )


def apply_trust_arguments(args: Any) -> None:
    """Make the options what every read of this process checks (``ConfigurationError``
    naming the file when the key file cannot be read)."""
    path = getattr(args, "signing_key_file", None)
    allow_pickle = not getattr(args, "no_pickle", False)
    trust = SnapshotTrust(read_key_file(path) if path is not None else None, allow_pickle)
    use_by_default(trust)
    set_allow_pickle(allow_pickle)
