"""Checked resolution of the file paths a ``_metadata`` names: it is input from outside.

A snapshot's files may lie only in the directories the snapshot came from: its own directory
(``chk-N`` or the savepoint directory) and, for a checkpoint ``<job>/chk-N``, the job's
``shared/`` and ``taskowned/``. ``SnapshotPaths`` resolves and checks every path of a
``_metadata`` before a handle is built from it; restore, inspection and cleanup act only
through those handles, so none of them reads or deletes a file elsewhere. A refusal raises
``UnsafeStatePathError`` naming the ``_metadata`` file, the path and the allowed directories.

- A relative path (relocatable savepoint files) is one or more plain names: no ``..``,
  ``.`` or empty segment, not absolute, not a URI.
- An absolute path has the snapshot's file system (scheme and bucket or host; ``s3``/
  ``s3a``/``s3n`` count as one, as do ``gs``/``gcs`` and plain paths/``file:`` URIs), no
  ``.``/``..``/empty segment, and lies strictly inside one of the directories.
- On local disk both checks are repeated on the real paths (symbolic links resolved), so a
  link inside a snapshot cannot lead out of it.
- Where entropy injection is configured for the snapshot's file system (``s3.entropy.key``),
  an absolute path may also carry the entropy (``s3.entropy.length`` letters and digits)
  where the key was, above the snapshot's directory.
- A RocksDB file name (the local name of an uploaded file) is one plain name of letters,
  digits, ``.``, ``_`` and ``-``.
- A savepoint (never deleted by a job) may also name files of the snapshots it was made
  from (the state processor's ``keep="reference"``): an absolute path on the same file
  system whose directory is another snapshot's (it holds a ``_metadata``), or the
  ``shared/``/``taskowned/`` of a job directory (it holds a ``chk-N``). Those are read,
  never deleted.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from sparkpoint.checkpoint.fs_storage import (
    CHECKPOINT_DIR_PREFIX,
    CHECKPOINT_SHARED_STATE_DIR,
    CHECKPOINT_TASK_OWNED_STATE_DIR,
)
from sparkpoint.checkpoint.storage import METADATA_FILE_NAME
from sparkpoint.errors import UnsafeStatePathError

__all__ = ["SnapshotPaths", "comparable_path", "path_below", "snapshot_directories"]

_FAMILIES = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "local": "file"}
_CHECKPOINT_DIR = re.compile(re.escape(CHECKPOINT_DIR_PREFIX) + r"\d+")
_LOCAL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_BAD_SEGMENTS = ("", ".", "..")


def snapshot_directories(exclusive_dir: str) -> tuple[str, ...]:
    """The directories a snapshot's files may lie in: its own, plus ``shared/`` and
    ``taskowned/`` next to it when it is a checkpoint directory ``chk-N``."""
    directory = exclusive_dir.rstrip("/") or exclusive_dir
    parent, _, name = directory.rpartition("/")
    if parent and _CHECKPOINT_DIR.fullmatch(name):
        return (
            directory,
            f"{parent}/{CHECKPOINT_SHARED_STATE_DIR}",
            f"{parent}/{CHECKPOINT_TASK_OWNED_STATE_DIR}",
        )
    return (directory,)


def _split(path: str) -> tuple[str, str, str]:
    """``(file system family, authority, path part)``; local paths are made absolute only
    by the caller (a ``..`` must be seen before it is normalised away)."""
    scheme, sep, rest = path.partition("://")
    if not sep:
        return "file", "", path[len("file:") :] if path.startswith("file:") else path
    family = _FAMILIES.get(scheme.lower(), scheme.lower())
    authority, slash, body = rest.partition("/")
    if family == "file" and authority == "localhost":
        authority = ""
    return family, authority, slash + body


def comparable_path(path: str) -> str:
    """One spelling per file, to compare paths: local paths absolute and without ``file:``,
    URIs with one scheme per file system family (``s3a://b/k`` is ``s3://b/k``)."""
    family, authority, body = _split(path)
    if family == "file" and not authority:
        return os.path.abspath(body)
    return f"{family}://{authority}{body}"


def path_below(path: object, root: str) -> str:
    """The part of ``path`` (a path a snapshot names) strictly below directory ``root``;
    ``ValueError`` with the reason otherwise. Same file system, no ``..`` segment, no NUL,
    and on local disk the real path (links resolved) must lie below the real root too."""
    if not isinstance(path, str):
        raise ValueError(f"is a {type(path).__name__}, not a path")
    if "\x00" in path:
        raise ValueError("contains a NUL character")
    if ".." in _split(path)[2].split("/"):
        raise ValueError("has a '..' segment")
    full, top = comparable_path(path), comparable_path(root).rstrip("/")
    if not top or not _inside(full, top):
        raise ValueError(f"lies outside {root}")
    family, authority, body = _split(path)
    if family == "file" and not authority:
        real = os.path.realpath(os.path.abspath(body))
        real_top = os.path.realpath(top)
        if not _inside(real, real_top):
            raise ValueError(f"resolves through a symbolic link to {real}, outside {root}")
    return full[len(top) + 1 :]


def _bad_segment(segments: list[str]) -> str | None:
    for segment in segments:
        if segment in _BAD_SEGMENTS:
            return "an empty segment" if not segment else f"a {segment!r} segment"
    return None


def _inside(path: str, root: str) -> bool:
    """Whether ``path`` lies strictly inside directory ``root`` (both normalised)."""
    return root != "/" and path.startswith(root.rstrip("/") + "/")


def _entropy_variant(body: str, root: str, length: int) -> bool:
    """Whether ``body`` lies inside ``root`` once an entropy string of ``length`` letters and
    digits, inserted above ``root``'s last segment (as a segment of its own or within one),
    is taken out."""
    last_slash = root.rfind("/")
    for k in range(1, last_slash + 2):
        head = root[:k]
        if not body.startswith(head):
            return False
        entropy = body[k : k + length]
        if len(entropy) != length or not entropy.isascii() or not entropy.isalnum():
            continue
        rest = body[k + length :]
        if root[k - 1] == "/" and _inside(rest, "/" + root[k:]):
            return True  # the key was a whole segment: ".../_entropy_/..." -> ".../x7Kq/..."
        if k <= last_slash and _inside(head + rest, root):
            return True
    return False


@dataclass
class SnapshotPaths:
    """Resolves and checks the paths of one snapshot's ``_metadata`` (see the module doc).

    ``exclusive_dir`` is the directory the snapshot was loaded from (``None``: no files can
    be checked, so none is accepted); ``source`` names the ``_metadata`` in errors.
    ``savepoint`` (set once the reader knows) admits files of other snapshots.
    """

    exclusive_dir: str | None
    source: str | None = None
    savepoint: bool = False
    directories: tuple[str, ...] = field(init=False)
    _family: str = field(init=False, default="")
    _authority: str = field(init=False, default="")
    _roots: tuple[str, ...] = field(init=False, default=())
    _real_roots: tuple[str, ...] | None = field(init=False, default=None)
    _other_snapshots: dict[str, bool] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.exclusive_dir is None:
            self.directories = ()
            return
        self.exclusive_dir = self.exclusive_dir.rstrip("/") or self.exclusive_dir
        self.directories = snapshot_directories(self.exclusive_dir)
        self._family, self._authority, _ = _split(self.exclusive_dir)
        bodies = [_split(directory)[2] for directory in self.directories]
        if self._family == "file":
            bodies = [os.path.abspath(body) for body in bodies]
        self._roots = tuple(body.rstrip("/") or "/" for body in bodies)

    # ---- checks -----------------------------------------------------------------------

    def refuse(self, path: str, reason: str) -> UnsafeStatePathError:
        """The error for ``path``: the ``_metadata`` file, the path, why, what is allowed."""
        where = f"checkpoint metadata file {self.source}" if self.source else "checkpoint metadata"
        allowed = (
            f"the snapshot's state files must lie in {', '.join(self.directories)}"
            if self.directories
            else "no snapshot directory was given to check it against (load the snapshot "
            "through its directory or _metadata path)"
        )
        return UnsafeStatePathError(
            f"Refusing state path {path!r} in {where}: it {reason}; {allowed}."
        )

    def resolve_relative(self, relative: str) -> str:
        """The location of ``relative`` (a file of the snapshot's own directory), checked."""
        if self.exclusive_dir is None:
            raise self.refuse(relative, "is relative and cannot be resolved without a context")
        if "\x00" in relative:
            raise self.refuse(relative, "contains a NUL character")
        if "://" in relative or relative.startswith(("/", "file:")):
            raise self.refuse(relative, "is absolute where a relative path is expected")
        bad = _bad_segment(relative.split("/"))
        if bad is not None:
            what = "escapes its directory with" if bad == "a '..' segment" else "has"
            raise self.refuse(relative, f"{what} {bad}")
        self._check_not_root(relative)
        path = f"{self.exclusive_dir}/{relative}"
        self._check_local(path, relative)
        return path

    def check_absolute(self, path: str) -> str:
        """``path`` itself, once checked to lie in the snapshot's directories."""
        if self.exclusive_dir is None:
            raise self.refuse(path, "cannot be checked")
        if "\x00" in path:
            raise self.refuse(path, "contains a NUL character")
        family, authority, body = _split(path)
        if (family, authority) != (self._family, self._authority):
            raise self.refuse(
                path,
                f"is on another file system ({family}://{authority}) than the snapshot "
                f"({self._family}://{self._authority})",
            )
        if not body.startswith("/"):
            raise self.refuse(path, "is relative where an absolute path is expected")
        bad = _bad_segment(body[1:].split("/"))
        if bad is not None:
            raise self.refuse(path, f"has {bad}")
        self._check_not_root(path)
        if any(_inside(body, root) for root in self._roots) or self._entropy_inside(body):
            self._check_local(path, path)
        elif self.savepoint and self._in_other_snapshot(path):
            parent = path.rsplit("/", 1)[0]
            self._check_local(path, path, (os.path.abspath(_split(parent)[2]),))
        else:
            other = " or another snapshot's" if self.savepoint else ""
            raise self.refuse(path, f"lies outside the snapshot's directories{other}")
        return path

    def check_local_name(self, name: str) -> str:
        """``name``, once checked to be one plain file name (a RocksDB file's local name)."""
        if not _LOCAL_NAME.fullmatch(name) or name in _BAD_SEGMENTS:
            raise self.refuse(name, "is not a plain file name (letters, digits, '.', '_' and '-')")
        return name

    # ---- helpers ----------------------------------------------------------------------

    def _check_not_root(self, path: str) -> None:
        if self._roots[0] == "/":
            raise self.refuse(
                path, "belongs to a snapshot whose directory is the root of its file system"
            )

    def _entropy_inside(self, body: str) -> bool:
        from sparkpoint.fs import get_filesystem

        assert self.exclusive_dir is not None
        fs = get_filesystem(self.exclusive_dir)
        if not fs.entropy_key:
            return False
        return any(_entropy_variant(body, root, fs.entropy_length) for root in self._roots)

    def _in_other_snapshot(self, path: str) -> bool:
        """Whether ``path``'s directory belongs to another snapshot (looked at once each)."""
        from sparkpoint.fs import get_filesystem

        parent = path.rsplit("/", 1)[0]
        if not _split(parent)[2].strip("/"):
            return False  # never the root of a file system
        known = self._other_snapshots.get(parent)
        if known is None:
            fs = get_filesystem(path)
            known = fs.exists(fs.join(parent, METADATA_FILE_NAME))
            if not known and fs.name(parent) in (
                CHECKPOINT_SHARED_STATE_DIR,
                CHECKPOINT_TASK_OWNED_STATE_DIR,
            ):
                job_dir = fs.parent(parent)
                known = any(
                    info.is_dir and _CHECKPOINT_DIR.fullmatch(fs.name(info.path)) is not None
                    for info in fs.list(job_dir)
                )
            self._other_snapshots[parent] = known
        return known

    def _check_local(self, path: str, shown: str, roots: tuple[str, ...] | None = None) -> None:
        """On local disk, the real path (links resolved) must be inside a real directory."""
        if self._family != "file":
            return
        if roots is not None:
            real_roots = tuple(os.path.realpath(root) for root in roots)
        else:
            if self._real_roots is None:
                self._real_roots = tuple(os.path.realpath(root) for root in self._roots)
            real_roots = self._real_roots
        real = os.path.realpath(os.path.abspath(_split(path)[2]))
        if not any(_inside(real, root) for root in real_roots):
            raise self.refuse(
                shown,
                f"resolves through a symbolic link to {real}, outside the snapshot's directories",
            )
