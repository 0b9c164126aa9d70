"""Scheme resolution, caching, options and environment variables of the fs registry."""

from __future__ import annotations

import importlib.util
import pickle

import pytest

from sparkpoint.fs import configure, get_filesystem
from sparkpoint.fs.arrow import ArrowFileSystem, LocalFileSystem
from sparkpoint.fs.fsspec_fs import FsspecFileSystem
from sparkpoint.fs.gcs import GcsfsFileSystem
from sparkpoint.fs.registry import create_filesystem, get_options, split_scheme
from sparkpoint.fs.s3 import S3FileSystem, S3Options


@pytest.fixture
def restore_options():  # type: ignore[no-untyped-def]
    saved = get_options()
    yield
    configure(saved)


def test_split_scheme() -> None:
    assert split_scheme("/tmp/x") == ("file", "")
    assert split_scheme("relative/x") == ("file", "")
    assert split_scheme("file:///tmp/x") == ("file", "")
    assert split_scheme("S3://Bucket/k") == ("s3", "Bucket")
    assert split_scheme("hdfs://nn:8020/p") == ("hdfs", "nn:8020")
    with pytest.raises(TypeError):
        split_scheme(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Invalid URI scheme"):
        split_scheme("://x")


def test_schemes_map_to_implementations() -> None:
    assert isinstance(create_filesystem("/tmp/x", {}, env={}), LocalFileSystem)
    assert isinstance(create_filesystem("file:///tmp/x", {}, env={}), LocalFileSystem)
    for scheme in ("s3", "s3a", "s3n"):
        fs = create_filesystem(f"{scheme}://b/k", {}, env={})
        assert isinstance(fs, S3FileSystem)
        assert fs.scheme == scheme
        assert fs.is_object_store
    gs = create_filesystem("gs://b/k", {}, env={})
    expected = ArrowFileSystem if importlib.util.find_spec("gcsfs") is None else GcsfsFileSystem
    assert isinstance(gs, expected) and gs.scheme == "gs" and gs.is_object_store
    abfs = create_filesystem("abfs://container/k", {}, env={})
    assert isinstance(abfs, FsspecFileSystem) and abfs.is_object_store
    hdfs = create_filesystem("hdfs://nn:8020/p", {}, env={})
    assert hdfs.scheme == "hdfs" and not hdfs.is_object_store
    mem = create_filesystem("memory://x", {}, env={})
    assert isinstance(mem, FsspecFileSystem) and not mem.is_object_store


def test_native_paths_for_each_scheme() -> None:
    s3 = create_filesystem("s3://b/k", {}, env={})
    assert isinstance(s3, ArrowFileSystem)
    assert s3.native("s3://bucket/a/b/") == "bucket/a/b"
    hdfs = create_filesystem("hdfs://nn:8020/p", {}, env={})
    assert isinstance(hdfs, ArrowFileSystem)
    assert hdfs.native("hdfs://nn:8020/data/x") == "/data/x"
    local = LocalFileSystem()
    assert local.native("file:///tmp/x") == "/tmp/x"


def test_hdfs_and_gcs_are_lazy_and_picklable() -> None:
    # Building must not connect (no Hadoop or GCS here); pickling keeps the arguments.
    hdfs = create_filesystem("hdfs://namenode:9000/p", {"hdfs.user": "alice"}, env={})
    copy = pickle.loads(pickle.dumps(hdfs))
    assert isinstance(copy, ArrowFileSystem) and copy.scheme == "hdfs"
    gs = create_filesystem("gs://b/k", {"gs.anonymous": "true"}, env={})
    assert pickle.loads(pickle.dumps(gs)).scheme == "gs"
    with pytest.raises(ValueError, match="Invalid HDFS port"):
        create_filesystem("hdfs://nn:port/p", {}, env={})


def test_s3_options_precedence_over_environment() -> None:
    env = {
        "AWS_ACCESS_KEY_ID": "env-key",
        "AWS_SECRET_ACCESS_KEY": "env-secret",
        "AWS_REGION": "eu-west-1",
        "AWS_ENDPOINT_URL": "http://env:9000",
    }
    from_env = S3Options.from_options({}, env)
    assert (from_env.access_key, from_env.secret_key) == ("env-key", "env-secret")
    assert (from_env.region, from_env.endpoint) == ("eu-west-1", "http://env:9000")
    options = {
        "s3.access-key": "opt-key",
        "s3.secret.key": "opt-secret",
        "s3.region": "us-west-2",
        "s3.endpoint": "https://opt:443",
        "s3.path.style.access": "false",
    }
    mine = S3Options.from_options(options, env)
    assert (mine.access_key, mine.secret_key) == ("opt-key", "opt-secret")
    assert (mine.region, mine.endpoint) == ("us-west-2", "https://opt:443")
    kwargs = mine.arrow_kwargs()
    assert kwargs["endpoint_override"] == "opt:443"
    assert kwargs["scheme"] == "https"
    assert kwargs["force_virtual_addressing"] is True
    assert kwargs["allow_delayed_open"] is True
    assert mine.s3fs_kwargs()["config_kwargs"] == {"s3": {"addressing_style": "virtual"}}


def test_s3_default_region_with_custom_endpoint() -> None:
    opts = S3Options.from_options({"s3.endpoint": "127.0.0.1:9000"}, {})
    assert opts.arrow_kwargs()["region"] == "us-east-1"
    assert "scheme" not in opts.arrow_kwargs()
    assert opts.s3fs_kwargs()["client_kwargs"]["endpoint_url"] == "https://127.0.0.1:9000"


def test_configure_replaces_and_clears_cache(restore_options) -> None:  # type: ignore[no-untyped-def]
    configure({"s3.entropy.key": "_e_"})
    first = get_filesystem("s3://bucket/a")
    assert get_filesystem("s3://other/b") is first
    assert first.entropy_key == "_e_"
    configure({})
    second = get_filesystem("s3://bucket/a")
    assert second is not first
    assert second.entropy_key is None
    assert get_options() == {}


def test_fsspec_options_by_scheme_prefix() -> None:
    fs = create_filesystem("memory://x", {"memory.skip_instance_cache": "True"}, env={})
    assert isinstance(fs, FsspecFileSystem)
    assert fs._storage_options == {"skip_instance_cache": "True"}
