"""Entropy injection: the key becomes random alphanumerics for data files, vanishes elsewhere."""

from __future__ import annotations

import re

import pytest

from sparkpoint.fs.entropy import (
    create_entropy_aware,
    generate_entropy,
    is_entropy_injecting,
    remove_entropy_marker_if_present,
    resolve_entropy,
)
from sparkpoint.fs.registry import create_filesystem

KEY = "_entropy_"


def test_resolve_entropy_injects_alphanumerics() -> None:
    out = resolve_entropy(f"s3://bucket/{KEY}/checkpoints/job/chk-1/f", KEY, 4, inject=True)
    assert re.fullmatch(r"s3://bucket/[A-Za-z0-9]{4}/checkpoints/job/chk-1/f", out)


def test_resolve_entropy_removes_marker_and_its_slash() -> None:
    out = resolve_entropy(f"s3://bucket/{KEY}/checkpoints/x", KEY, 4, inject=False)
    assert out == "s3://bucket/checkpoints/x"


def test_only_the_first_marker_and_only_in_the_path() -> None:
    path = f"s3://{KEY}bucket/a/{KEY}/b/{KEY}"
    out = resolve_entropy(path, KEY, 3, inject=True)
    assert out.startswith(f"s3://{KEY}bucket/a/")
    assert out.endswith(f"/b/{KEY}")
    assert re.fullmatch(rf"s3://{KEY}bucket/a/[A-Za-z0-9]{{3}}/b/{KEY}", out)


def test_path_without_marker_is_unchanged() -> None:
    assert resolve_entropy("s3://bucket/plain/x", KEY, 4, inject=True) == "s3://bucket/plain/x"


def test_generate_entropy_length_and_alphabet() -> None:
    values = {generate_entropy(8) for _ in range(50)}
    assert len(values) == 50
    assert all(re.fullmatch(r"[A-Za-z0-9]{8}", v) for v in values)


def test_filesystem_entropy_settings_from_options() -> None:
    fs = create_filesystem("s3://b/x", {"s3.entropy.key": KEY, "s3.entropy.length": "6"}, env={})
    assert fs.entropy_key == KEY
    assert fs.entropy_length == 6
    assert is_entropy_injecting(fs)
    assert is_entropy_injecting(fs, f"s3://b/{KEY}/cp")
    assert not is_entropy_injecting(fs, "s3://b/cp")
    assert remove_entropy_marker_if_present(fs, f"s3://b/{KEY}/cp") == "s3://b/cp"


def test_local_filesystem_never_injects(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fs = create_filesystem(str(tmp_path), {"s3.entropy.key": KEY}, env={})
    assert not is_entropy_injecting(fs, f"{tmp_path}/{KEY}")
    path = f"{tmp_path}/{KEY}"
    assert remove_entropy_marker_if_present(fs, path) == path


def test_invalid_entropy_length() -> None:
    with pytest.raises(ValueError, match=r"'x' for 's3\.entropy\.length': expected an integer"):
        create_filesystem("s3://b/x", {"s3.entropy.key": KEY, "s3.entropy.length": "x"}, env={})
    with pytest.raises(ValueError, match=r"'0' for 's3\.entropy\.length': expected an integer"):
        create_filesystem("s3://b/x", {"s3.entropy.key": KEY, "s3.entropy.length": "0"}, env={})


@pytest.mark.s3
def test_create_entropy_aware_on_s3(s3_server) -> None:  # type: ignore[no-untyped-def]
    options = {**s3_server.options, "s3.entropy.key": KEY, "s3.entropy.length": "5"}
    fs = create_filesystem("s3://x/y", options)
    base = s3_server.unique_prefix()
    stream, actual = create_entropy_aware(fs, f"{base}/{KEY}/data/f1")
    with stream:
        stream.write(b"state")
    assert re.fullmatch(re.escape(base) + r"/[A-Za-z0-9]{5}/data/f1", actual)
    assert fs.read_bytes(actual) == b"state"
    assert not fs.exists(f"{base}/{KEY}/data/f1")
