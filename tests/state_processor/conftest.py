"""The runtime tests' SparkSession, shared with the state processor tests (one per run)."""

from tests.runtime.conftest import spark

__all__ = ["spark"]
