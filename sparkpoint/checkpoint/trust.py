"""``SnapshotTrust``: what reading a snapshot may rely on, from the ``sparkpoint.snapshot.*``
keys: the signing key its ``_metadata`` must be signed with, and whether pickled state may be
read from it (pickled state is code: unpickling runs what the snapshot chose)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.config import SnapshotOptions
from sparkpoint.errors import ConfigurationError, UntrustedSnapshotError

__all__ = ["SnapshotTrust", "default_trust", "refuse_pickle", "use_by_default"]


@dataclass(frozen=True)
class SnapshotTrust:
    """The signing key (``None``: snapshots are neither signed nor required to be) and
    whether pickled state may be read. The key never appears in ``repr``."""

    signing_key: bytes | None = field(default=None, repr=False)
    allow_pickle: bool = SnapshotOptions.ALLOW_PICKLE.default

    def __post_init__(self) -> None:
        if self.signing_key is not None and not self.signing_key:
            raise ConfigurationError("The snapshot signing key is empty")

    @property
    def signed(self) -> bool:
        """Whether snapshots are signed when written and must be signed when read."""
        return self.signing_key is not None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SnapshotTrust:
        """The trust settings of ``config``; a key file is read now (``ConfigurationError``
        naming the key and the file when it cannot be, or when both keys are set)."""
        key = SnapshotOptions.SIGNING_KEY.read(config)
        key_file = SnapshotOptions.SIGNING_KEY_FILE.read(config)
        allow_pickle = SnapshotOptions.ALLOW_PICKLE.read(config)
        if key is not None and key_file is not None:
            raise ConfigurationError(
                f"Both {SnapshotOptions.SIGNING_KEY.key} and "
                f"{SnapshotOptions.SIGNING_KEY_FILE.key} are set; set one of them"
            )
        if key_file is not None:
            return cls(read_key_file(key_file), allow_pickle)
        if key is not None:
            if not key.strip():
                raise ConfigurationError(f"{SnapshotOptions.SIGNING_KEY.key} is empty")
            return cls(key.encode("utf-8"), allow_pickle)
        return cls(None, allow_pickle)


def read_key_file(path: str) -> bytes:
    """The signing key in the local file ``path`` (its bytes without surrounding whitespace)."""
    option = SnapshotOptions.SIGNING_KEY_FILE.key
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 16).strip()
    except OSError as exc:
        raise ConfigurationError(
            f"Cannot read the snapshot signing key file {path!r} ({option}): {exc.strerror}"
        ) from None
    if not data:
        raise ConfigurationError(f"The snapshot signing key file {path!r} ({option}) is empty")
    return data


def refuse_pickle(what: str) -> UntrustedSnapshotError:
    """The error when ``what`` (naming the file and the state) would be unpickled while
    ``sparkpoint.snapshot.allow-pickle`` is false."""
    return UntrustedSnapshotError(
        f"Refusing to unpickle {what}: {SnapshotOptions.ALLOW_PICKLE.key} is false (pickled "
        "state is code: unpickling runs what the snapshot chose). Read it with "
        f"{SnapshotOptions.ALLOW_PICKLE.key}=true only if you trust who wrote it."
    )


_default = SnapshotTrust()


def use_by_default(trust: SnapshotTrust) -> None:
    """Make ``trust`` what this process applies where no trust settings are passed: for a
    process that reads snapshots with one setting (the CLI). A job passes its own."""
    global _default
    _default = trust


def default_trust() -> SnapshotTrust:
    """The settings ``use_by_default`` set (no key, pickle allowed, until it is called)."""
    return _default
