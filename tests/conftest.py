"""Suite-wide pytest configuration: plugins and the storage-location parametrisation."""

from __future__ import annotations

import pytest

pytest_plugins = ["tests.fixtures.s3"]


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def storage_base(request: pytest.FixtureRequest, tmp_path) -> str:  # type: ignore[no-untyped-def]
    """A fresh, empty base URI: a ``file://`` temp dir, or a unique prefix on moto S3."""
    if request.param == "local":
        return tmp_path.as_uri()
    from tests.fixtures.s3 import ensure_s3_configured

    server = request.getfixturevalue("s3_server")
    ensure_s3_configured(server)
    return server.unique_prefix()
