"""``FileSystemOptions``: the keys ``sparkpoint.fs.configure({...})`` reads, documented here.

These options are process-wide and set through ``sparkpoint.fs.configure`` (the runtime ships
them to executors), not through the environment's ``Configuration``; ``sparkpoint.fs`` parses
them with these options, and unset ones fall back to the environment variables named.
"""

from __future__ import annotations

from sparkpoint.config.option import BOOLEAN, STRING, ConfigOption, OptionGroup, int_type

__all__ = ["FileSystemOptions"]


class FileSystemOptions(OptionGroup):
    """Object store and HDFS connection options, given to ``sparkpoint.fs.configure({...})``
    (not to the environment's ``Configuration``)."""

    TITLE = "File systems (sparkpoint.fs.configure)"

    S3_ENDPOINT: ConfigOption[str | None] = ConfigOption(
        "s3.endpoint",
        STRING,
        None,
        "S3 endpoint URL; unset: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL.",
    )
    S3_REGION: ConfigOption[str | None] = ConfigOption(
        "s3.region",
        STRING,
        None,
        "S3 region; unset: AWS_REGION, AWS_DEFAULT_REGION (us-east-1 with an endpoint).",
    )
    S3_ACCESS_KEY: ConfigOption[str | None] = ConfigOption(
        "s3.access-key",
        STRING,
        None,
        "S3 access key; unset: AWS_ACCESS_KEY_ID.",
        ("s3.access.key",),
    )
    S3_SECRET_KEY: ConfigOption[str | None] = ConfigOption(
        "s3.secret-key",
        STRING,
        None,
        "S3 secret key; unset: AWS_SECRET_ACCESS_KEY.",
        ("s3.secret.key",),
    )
    S3_SESSION_TOKEN: ConfigOption[str | None] = ConfigOption(
        "s3.session-token",
        STRING,
        None,
        "S3 session token; unset: AWS_SESSION_TOKEN.",
    )
    S3_PATH_STYLE_ACCESS: ConfigOption[bool | None] = ConfigOption(
        "s3.path.style.access",
        BOOLEAN,
        None,
        "Whether buckets are addressed by path rather than by host name.",
        ("s3.path-style-access",),
    )
    S3_ENTROPY_KEY: ConfigOption[str | None] = ConfigOption(
        "s3.entropy.key",
        STRING,
        None,
        "Marker in checkpoint paths replaced by random characters in state files.",
    )
    S3_ENTROPY_LENGTH = ConfigOption(
        "s3.entropy.length",
        int_type(minimum=1),
        4,
        "Number of random characters that replace the entropy key.",
    )
    GS_ENDPOINT: ConfigOption[str | None] = ConfigOption(
        "gs.endpoint",
        STRING,
        None,
        "GCS endpoint; unset: STORAGE_EMULATOR_HOST.",
    )
    GS_PROJECT_ID: ConfigOption[str | None] = ConfigOption(
        "gs.project-id",
        STRING,
        None,
        "GCS project; unset: GOOGLE_CLOUD_PROJECT.",
    )
    GS_ANONYMOUS = ConfigOption(
        "gs.anonymous",
        BOOLEAN,
        False,
        "Whether GCS is accessed without credentials.",
    )
    HDFS_USER: ConfigOption[str | None] = ConfigOption(
        "hdfs.user",
        STRING,
        None,
        "HDFS user name; unset: HADOOP_USER_NAME.",
    )
    ALLOW_NON_ATOMIC_CREATE = ConfigOption(
        "sparkpoint.fs.allow-non-atomic-create",
        BOOLEAN,
        False,
        "Accept checkpoint storage on a file system that creates files by checking, then "
        "writing (two writers of one file may both succeed); see docs/storage.md.",
    )
