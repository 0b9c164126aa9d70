"""The CLI's snapshot-trust options: ``--signing-key-file`` (refuse snapshots not signed with
that key, and unpickle those that are), ``--no-pickle`` (read pickled state as plain data
only, the default without a key) and ``--allow-pickle`` (unpickle any snapshot), applied to
the whole process before a command reads anything (``docs/storage.md``)."""

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
    pickle = parser.add_mutually_exclusive_group()
    pickle.add_argument(
        "--no-pickle",
        action="store_true",
        help="never unpickle code from a snapshot: pickled state is read as plain data only "
        "(sparkpoint.snapshot.allow-pickle=false; the default unless --signing-key-file "
        "verified the snapshot)",
    )
    pickle.add_argument(
        "--allow-pickle",
        action="store_true",
        help="unpickle pickled state of any snapshot read, signed or not: only for snapshots "
        "you trust, as unpickling runs code the snapshot chose "
        "(sparkpoint.snapshot.allow-pickle=true)",
    )


def apply_trust_arguments(args: Any) -> None:
    """Make the options what every read of this process checks (``ConfigurationError``
    naming the file when the key file cannot be read)."""
    path = getattr(args, "signing_key_file", None)
    allow_pickle: bool | None = None  # by origin: with a key, every snapshot read is verified
    if getattr(args, "no_pickle", False):
        allow_pickle = False
    elif getattr(args, "allow_pickle", False):
        allow_pickle = True
    trust = SnapshotTrust(read_key_file(path) if path is not None else None, allow_pickle)
    use_by_default(trust)
    set_allow_pickle(trust.pickle_allowed(trust.signed))
