"""The differential tests share the runtime tests' SparkSession fixture."""

from tests.runtime.conftest import spark

__all__ = ["spark"]
