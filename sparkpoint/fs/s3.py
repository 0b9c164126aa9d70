"""S3 (and S3-protocol stores): pyarrow for reads, listings and deletes; s3fs for writes.

Writes go through s3fs (a core dependency) because pyarrow's S3 client cannot send S3's
conditional PUT (``If-None-Match: *``). s3fs sends it on one-shot uploads and on completing
multipart uploads, so a no-overwrite create is one atomic request with no HEAD before it:
of two writers of one key, the second to finish gets ``FileExistsError``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO, cast

import pyarrow.fs as pafs

from sparkpoint.config.filesystem import FileSystemOptions
from sparkpoint.fs.arrow import ArrowFileSystem, split_endpoint

__all__ = ["S3FileSystem", "S3Options"]

_PART_SIZE = 8 * 1024 * 1024


def _first(options: Mapping[str, str], *keys: str) -> str | None:
    for key in keys:
        value = options.get(key)
        if value:
            return value
    return None


@dataclass(frozen=True, slots=True)
class S3Options:
    """Connection settings for S3, from ``s3.*`` options and then ``AWS_*`` variables."""

    endpoint: str | None = None
    region: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None
    path_style_access: bool | None = None
    entropy_key: str | None = None
    entropy_length: int = FileSystemOptions.S3_ENTROPY_LENGTH.default

    @classmethod
    def from_options(cls, options: Mapping[str, str], env: Mapping[str, str]) -> S3Options:
        """Options win over environment variables; Flink's dotted aliases are accepted."""
        o = FileSystemOptions
        return cls(
            endpoint=o.S3_ENDPOINT.read(options)
            or _first(env, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
            region=o.S3_REGION.read(options) or _first(env, "AWS_REGION", "AWS_DEFAULT_REGION"),
            access_key=o.S3_ACCESS_KEY.read(options) or _first(env, "AWS_ACCESS_KEY_ID"),
            secret_key=o.S3_SECRET_KEY.read(options) or _first(env, "AWS_SECRET_ACCESS_KEY"),
            session_token=o.S3_SESSION_TOKEN.read(options) or _first(env, "AWS_SESSION_TOKEN"),
            path_style_access=o.S3_PATH_STYLE_ACCESS.read(options),
            entropy_key=o.S3_ENTROPY_KEY.read(options),
            entropy_length=o.S3_ENTROPY_LENGTH.read(options),
        )

    def arrow_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``pyarrow.fs.S3FileSystem``."""
        kwargs: dict[str, Any] = {"allow_delayed_open": True}
        if self.endpoint:
            scheme, host = split_endpoint(self.endpoint)
            kwargs["endpoint_override"] = host
            if scheme:
                kwargs["scheme"] = scheme
        region = self.region or ("us-east-1" if self.endpoint else None)
        if region:
            kwargs["region"] = region
        if self.access_key and self.secret_key:
            kwargs["access_key"] = self.access_key
            kwargs["secret_key"] = self.secret_key
            if self.session_token:
                kwargs["session_token"] = self.session_token
        if self.path_style_access is False:
            kwargs["force_virtual_addressing"] = True
        return kwargs

    def s3fs_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``s3fs.S3FileSystem``."""
        client: dict[str, Any] = {}
        if self.endpoint:
            client["endpoint_url"] = (
                self.endpoint if "://" in self.endpoint else f"https://{self.endpoint}"
            )
        region = self.region or ("us-east-1" if self.endpoint else None)
        if region:
            client["region_name"] = region
        kwargs: dict[str, Any] = {"client_kwargs": client}
        if self.access_key and self.secret_key:
            kwargs.update(key=self.access_key, secret=self.secret_key)
            if self.session_token:
                kwargs["token"] = self.session_token
        if self.path_style_access is not None or self.endpoint:
            style = "virtual" if self.path_style_access is False else "path"
            kwargs["config_kwargs"] = {"s3": {"addressing_style": style}}
        return kwargs


class S3FileSystem(ArrowFileSystem):
    """``s3://bucket/key`` (also ``s3a://``, ``s3n://``); entropy injection when configured."""

    atomic_create = True

    def __init__(self, options: S3Options, scheme: str = "s3") -> None:
        factory = functools.partial(pafs.S3FileSystem, **options.arrow_kwargs())
        super().__init__(scheme, factory, is_object_store=True)
        self.options = options
        self.entropy_key = options.entropy_key
        self.entropy_length = options.entropy_length
        self._s3fs: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_s3fs"] = None
        return state

    @property
    def s3fs(self) -> Any:
        """The s3fs filesystem every write goes through (created on first use)."""
        if self._s3fs is None:
            import s3fs

            self._s3fs = s3fs.S3FileSystem(**self.options.s3fs_kwargs())
        return self._s3fs

    def open_output(self, path: str, *, overwrite: bool = False) -> BinaryIO:
        if overwrite:
            return cast(BinaryIO, self.s3fs.open(self.native(path), "wb", block_size=_PART_SIZE))
        from sparkpoint.fs.s3_exclusive import open_exclusive

        return open_exclusive(self.s3fs, self.native(path), _PART_SIZE)

    def discard_output(self, stream: BinaryIO, path: str) -> None:
        """Abort the upload: an S3 object appears only when its stream closes."""
        discard = getattr(stream, "discard", None)
        if discard is None:
            super().discard_output(stream, path)
        else:
            discard()

    def write_atomic(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        mode = "overwrite" if overwrite else "create"
        self.s3fs.pipe_file(self.native(path), bytes(data), mode=mode)
