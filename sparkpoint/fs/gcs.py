"""Google Cloud Storage (``gs://``, ``gcs://``): gcsfs when installed, else pyarrow.

gcsfs (``pip install 'sparkpoint[gcs]'``) can send GCS's generation precondition
``ifGenerationMatch=0``, so a no-overwrite create is one upload request that GCS refuses
when the object exists. pyarrow's GCS client cannot: without gcsfs, creates check and then
write, and checkpoint storage refuses ``gs://`` unless the user opts in.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Mapping
from typing import Any

import pyarrow.fs as pafs

from sparkpoint.config.filesystem import FileSystemOptions
from sparkpoint.fs.arrow import ArrowFileSystem, split_endpoint
from sparkpoint.fs.base import FileSystem
from sparkpoint.fs.fsspec_fs import FsspecFileSystem

__all__ = ["GcsfsFileSystem", "gcs_filesystem"]


class GcsfsFileSystem(FsspecFileSystem):
    """``gs://`` through gcsfs; an emulator endpoint gets gcsfs's plain JSON-API client."""

    @property
    def fsspec(self) -> Any:
        if self._fs is None:
            import gcsfs

            if "endpoint_url" in self._storage_options:
                # Emulators speak only the JSON API; gcsfs's default class first asks the
                # bucket type over gRPC, which an emulator never answers.
                self._fs = gcsfs.core.GCSFileSystem(**self._storage_options)
            else:
                self._fs = gcsfs.GCSFileSystem(**self._storage_options)
        return self._fs


def gcs_filesystem(
    options: Mapping[str, str], env: Mapping[str, str], scheme: str = "gs"
) -> FileSystem:
    """GCS from ``gs.endpoint`` (``STORAGE_EMULATOR_HOST``), ``gs.project-id``
    (``GOOGLE_CLOUD_PROJECT``) and ``gs.anonymous``; credentials from the Google environment."""
    endpoint = FileSystemOptions.GS_ENDPOINT.read(options) or env.get("STORAGE_EMULATOR_HOST")
    project = FileSystemOptions.GS_PROJECT_ID.read(options) or env.get("GOOGLE_CLOUD_PROJECT")
    anonymous = FileSystemOptions.GS_ANONYMOUS.read(options)
    if importlib.util.find_spec("gcsfs") is not None:
        storage: dict[str, Any] = {}
        if endpoint:
            storage["endpoint_url"] = endpoint if "://" in endpoint else f"https://{endpoint}"
        if project:
            storage["project"] = project
        if anonymous:
            storage["token"] = "anon"
        return GcsfsFileSystem(scheme, storage)
    kwargs: dict[str, Any] = {}
    if endpoint:
        endpoint_scheme, host = split_endpoint(endpoint)
        kwargs["endpoint_override"] = host
        if endpoint_scheme:
            kwargs["scheme"] = endpoint_scheme
    if project:
        kwargs["project_id"] = project
    if anonymous:
        kwargs["anonymous"] = True
    fs = ArrowFileSystem(
        scheme, functools.partial(pafs.GcsFileSystem, **kwargs), is_object_store=True
    )
    fs.non_atomic_reason = (
        "gcsfs is not installed and pyarrow's GCS client cannot send the precondition "
        "ifGenerationMatch=0; install it with pip install 'sparkpoint[gcs]'"
    )
    return fs
