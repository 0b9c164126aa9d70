"""What ``sparkpoint run`` hands the job it submits, as environment variables of the driver
process (spark-submit's driver in client deploy mode inherits them): Flink configuration
keys for the job's environment (the restore path of ``-s``, ...), as Flink's client hands
``execution.savepoint.path`` to the program's context environment, and the file the driver
reports its job id and dashboard URL to (``run -d``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from sparkpoint.errors import ConfigurationError

__all__ = [
    "CLIENT_CONFIGURATION_ENV",
    "JOB_INFO_FILE_ENV",
    "client_configuration",
    "encode_client_configuration",
]

CLIENT_CONFIGURATION_ENV = "SPARKPOINT_CLIENT_CONFIGURATION"
"""A JSON object of configuration keys (strings) and values (strings) that
``StreamExecutionEnvironment.get_execution_environment`` applies on top of its argument."""

JOB_INFO_FILE_ENV = "SPARKPOINT_JOB_INFO_FILE"
"""A path the driver writes, once, a JSON object describing the first job it starts."""


def encode_client_configuration(configuration: Mapping[str, str]) -> str:
    """The value of ``CLIENT_CONFIGURATION_ENV`` that carries ``configuration``."""
    return json.dumps(dict(configuration), sort_keys=True)


def client_configuration(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The configuration ``sparkpoint run`` set for this driver (empty when none)."""
    raw = (os.environ if environ is None else environ).get(CLIENT_CONFIGURATION_ENV, "")
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ConfigurationError(
            f"{CLIENT_CONFIGURATION_ENV} is not JSON ({exc}): {raw[:200]!r}; expected an "
            "object of configuration keys and string values"
        ) from None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigurationError(
            f"{CLIENT_CONFIGURATION_ENV} must be a JSON object of configuration keys and "
            f"string values, not {raw[:200]!r}"
        )
    return value
