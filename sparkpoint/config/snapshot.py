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
    SIGNING: ConfigOption[bool] = ConfigOption(
        "sparkpoint.snapshot.signing",
        BOOLEAN,
        False,
        "Sign snapshots even though no key is given: with neither "
        "sparkpoint.snapshot.signing-key nor sparkpoint.snapshot.signing-key-file set, the key "
        "is read from $XDG_CONFIG_HOME/sparkpoint/signing-key (default "
        "~/.config/sparkpoint/signing-key), and a signing-key-file that does not exist yet is "
        "generated: 64 random hex digits, mode 0600 (its directory 0700). Other hosts that "
        "restore or read the snapshots need a copy of that file.",
    )
    ALLOW_PICKLE: ConfigOption[bool | None] = ConfigOption(
        "sparkpoint.snapshot.allow-pickle",
        BOOLEAN,
        None,
        "Whether pickled state (keys, untyped values, heap checkpoints' pickle blocks, heap "
        "changelog entries) may be unpickled from a snapshot when restoring, in `sparkpoint "
        "savepoint dump` and in SavepointReader. Unpickling runs code the snapshot chose. "
        "Unset: by origin -- a snapshot signed with the configured signing key, or one of the "
        "job's own (signed with its checkpoint directory's origin key), is unpickled; any "
        "other is read as plain data only (a pickle naming a class or function is refused). "
        "true: every snapshot is unpickled (opt in for one you trust). false: none is, the "
        "job's own included.",
    )
