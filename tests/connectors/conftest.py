"""The connector tests share the runtime tests' SparkSession and environment fixtures."""

from tests.runtime.conftest import env, spark

__all__ = ["env", "spark"]
