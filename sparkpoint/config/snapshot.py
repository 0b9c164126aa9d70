"""``SnapshotOptions``: what a checkpoint or savepoint is trusted with when it is read
(``docs/storage.md``, "What a snapshot is trusted with")."""

from __future__ import annotations

from sparkpoint.config.option import BOOLEAN, STRING, ConfigOption, OptionGroup

__all__ = ["SnapshotOptions"]


class SnapshotOptions(OptionGroup):
    """Signing of ``_metadata`` files and whether pickled state may be read."""

    TITLE = "Snapshot trust"

    SIGNING_KEY: ConfigOption[str | None] = ConfigOption(
        "sparkpoint.snapshot.signing-key",
        STRING,
        None,
        "Secret key (its UTF-8 bytes) of an HMAC-SHA256 that every _metadata written carries "
        "over its content and, through the SHA-256 of each state file it records, over every "
        "state file. Set: restore, the CLI and the state processor refuse an unsigned snapshot "
        "or one whose signature does not match, before reading any state. Prefer "
        "sparkpoint.snapshot.signing-key-file; setting both is refused.",
    )
    SIGNING_KEY_FILE: ConfigOption[str | None] = ConfigOption(
        "sparkpoint.snapshot.signing-key-file",
        STRING,
        None,
        "Local file holding the signing key (its bytes, without surrounding whitespace); "
        "read when the job, CLI command or reader starts. Same effect as "
        "sparkpoint.snapshot.signing-key.",
    )
    ALLOW_PICKLE = ConfigOption(
        "sparkpoint.snapshot.allow-pickle",
        BOOLEAN,
        True,
        "Whether pickled state (untyped keys and values, heap checkpoints' pickle blocks, "
        "heap changelog entries) may be read from a snapshot when restoring, in `sparkpoint "
        "savepoint dump` and in SavepointReader. Unpickling runs code the snapshot chose: set "
        "false to restore or read snapshots from others (typed state only). True by default "
        "so that a job's own checkpoints of untyped state restore.",
    )
