"""Suite-wide pytest configuration: plugins, markers and the storage-location parametrisation.

Markers follow from what a test uses, so ``pytest -m "not spark"`` runs the pure-Python
suite: a test that requests the ``spark`` fixture (directly or through ``env``) or is marked
``cluster`` is marked ``spark``; one that requests ``s3_server`` is marked ``s3``. Tests that
start Spark in a subprocess carry the marker themselves.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["tests.fixtures.s3", "tests.fixtures.recording_fs", "tests.fixtures.postgres"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Add the ``spark`` and ``s3`` markers by fixture use (see the module docstring)."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if "spark" in fixtures or item.get_closest_marker("cluster") is not None:
            item.add_marker(pytest.mark.spark)
        if "s3_server" in fixtures:
            item.add_marker(pytest.mark.s3)


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def storage_base(request: pytest.FixtureRequest, tmp_path) -> str:  # type: ignore[no-untyped-def]
    """A fresh, empty base URI: a ``file://`` temp dir, or a unique prefix on moto S3."""
    if request.param == "local":
        return tmp_path.as_uri()
    from tests.fixtures.s3 import ensure_s3_configured

    server = request.getfixturevalue("s3_server")
    ensure_s3_configured(server)
    return server.unique_prefix()
