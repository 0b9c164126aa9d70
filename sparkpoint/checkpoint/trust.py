"""``SnapshotTrust``: what reading a snapshot may rely on, from the ``sparkpoint.snapshot.*``
keys: the signing key its ``_metadata`` must be signed with, and whether pickled state may be
read from it (pickled state is code: unpickling runs what the snapshot chose). Unless
``allow-pickle`` says otherwise, only trusted snapshots are unpickled: signed with the
configured key, or the job's own (``checkpoint.origin``); docs/storage.md."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.checkpoint.key_files import create_key_file
from sparkpoint.checkpoint.key_files import read_key_file as read_key_file_of
from sparkpoint.checkpoint.origin import origin_key
from sparkpoint.config import SnapshotOptions
from sparkpoint.errors import ConfigurationError, UntrustedSnapshotError

__all__ = [
    "SnapshotTrust",
    "default_signing_key_path",
    "default_trust",
    "read_key_file",
    "refuse_pickle",
    "use_by_default",
]


@dataclass(frozen=True)
class SnapshotTrust:
    """The signing key (``None``: snapshots are neither signed nor required to be), whether
    pickled state may be read (``None``: by origin, ``pickle_allowed``), and the job's own
    checkpoint directory, whose origin key (``checkpoint.origin``) marks the job's own
    snapshots when no signing key is configured. The key never appears in ``repr``."""

    signing_key: bytes | None = field(default=None, repr=False)
    allow_pickle: bool | None = SnapshotOptions.ALLOW_PICKLE.default
    origin_dir: str | None = None

    def __post_init__(self) -> None:
        if self.signing_key is not None and not self.signing_key:
            raise ConfigurationError("The snapshot signing key is empty")

    @property
    def signed(self) -> bool:
        """Whether snapshots are signed when written and must be signed when read."""
        return self.signing_key is not None

    def pickle_allowed(self, trusted: bool) -> bool:
        """Whether a snapshot may be unpickled: ``allow-pickle`` when set, else whether the
        snapshot is ``trusted`` (signed with the configured key, or the job's own)."""
        return trusted if self.allow_pickle is None else self.allow_pickle

    def key_for_writing(self) -> bytes | None:
        """The key a ``_metadata`` written now is signed with: the signing key, else the
        origin key of the job's checkpoint directory (generated on first use), else none."""
        if self.signing_key is not None:
            return self.signing_key
        if self.origin_dir is None:
            return None
        return origin_key(self.origin_dir, create=True)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SnapshotTrust:
        """The trust settings of ``config``; a key file is read (or, with
        ``sparkpoint.snapshot.signing``, generated) now: ``ConfigurationError`` naming the
        key and the file when it cannot be, or when both keys are set."""
        key = SnapshotOptions.SIGNING_KEY.read(config)
        key_file = SnapshotOptions.SIGNING_KEY_FILE.read(config)
        allow_pickle = SnapshotOptions.ALLOW_PICKLE.read(config)
        signing = SnapshotOptions.SIGNING.read(config)
        if key is not None and key_file is not None:
            raise ConfigurationError(
                f"Both {SnapshotOptions.SIGNING_KEY.key} and "
                f"{SnapshotOptions.SIGNING_KEY_FILE.key} are set; set one of them"
            )
        if key is not None:
            if not key.strip():
                raise ConfigurationError(f"{SnapshotOptions.SIGNING_KEY.key} is empty")
            return cls(key.encode("utf-8"), allow_pickle)
        if key_file is None and signing:
            key_file = default_signing_key_path()
        if key_file is None:
            return cls(None, allow_pickle)
        if signing and not os.path.lexists(key_file):
            option = SnapshotOptions.SIGNING_KEY_FILE.key
            return cls(create_key_file(key_file, _KEY_FILE, option), allow_pickle)
        return cls(read_key_file(key_file), allow_pickle)


def default_signing_key_path() -> str:
    """Where ``sparkpoint.snapshot.signing`` keeps the key when no key file is named:
    ``$XDG_CONFIG_HOME/sparkpoint/signing-key``, by default under ``~/.config``."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "sparkpoint", "signing-key")


_KEY_FILE = "the snapshot signing key file"


def read_key_file(path: str) -> bytes:
    """The signing key in the local file ``path`` (its bytes without surrounding
    whitespace); refused when its group or others may read it (``key_files``)."""
    return read_key_file_of(path, _KEY_FILE, SnapshotOptions.SIGNING_KEY_FILE.key)


def refuse_pickle(what: str) -> UntrustedSnapshotError:
    """The error when ``what`` (naming the file and the state) would be unpickled from a
    snapshot that may only be read as plain data."""
    key = SnapshotOptions.ALLOW_PICKLE.key
    return UntrustedSnapshotError(
        f"Refusing to unpickle {what}. If you trust who wrote the snapshot, set {key}=true "
        "(CLI: --allow-pickle). Pickled state is code (unpickling runs what the snapshot "
        "chose), and this snapshot is read as plain data only: it is neither signed with the "
        f"configured signing key nor one of this job's own, or {key} is false. To trust your "
        "own snapshots wherever they are, sign them (sparkpoint.snapshot.signing=true)."
    )


_default = SnapshotTrust()


def use_by_default(trust: SnapshotTrust) -> None:
    """Make ``trust`` what this process applies where no trust settings are passed: for a
    process that reads snapshots with one setting (the CLI). A job passes its own."""
    global _default
    _default = trust


def default_trust() -> SnapshotTrust:
    """The settings ``use_by_default`` set (until it is called: no key, and pickle by
    origin, so a snapshot read without settings is read as plain data only)."""
    return _default
