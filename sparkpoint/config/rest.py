"""``RestOptions``: the REST API the driver serves to control a job from outside its process."""

from __future__ import annotations

from sparkpoint.config.option import BOOLEAN, STRING, ConfigOption, OptionGroup

__all__ = ["RestOptions"]


class RestOptions(OptionGroup):
    """Flink's REST API for the running job (``/jobs``, stop with a savepoint, cancel,
    savepoints), on the dashboard's server: ``sparkpoint.dashboard.host`` and
    ``sparkpoint.dashboard.port``. Requests that change the job need the job's token."""

    TITLE = "REST API"

    ENABLED = ConfigOption(
        "sparkpoint.rest.enabled",
        BOOLEAN,
        False,
        "Serve Flink's REST API for the running job on the dashboard's host and port "
        "(GET /jobs, /jobs/<id>; PATCH /jobs/<id> cancels; POST /jobs/<id>/stop, "
        "/jobs/<id>/savepoints), used by sparkpoint list, stop, cancel and savepoint. "
        "Requests that change the job must send the job's token (Authorization: Bearer), "
        "which the driver writes to <jobs-dir>/<job id>.json, readable by the job's user "
        "only.",
    )
    JOBS_DIR: ConfigOption[str | None] = ConfigOption(
        "sparkpoint.rest.jobs-dir",
        STRING,
        None,
        "Directory where the driver writes each job's REST address and token "
        "(<job id>.json, mode 0600, in a directory of mode 0700) while the job runs; "
        "unset: $SPARKPOINT_JOBS_DIR, else ~/.sparkpoint/jobs (where the sparkpoint "
        "command looks).",
    )
