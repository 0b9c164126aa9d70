"""Signing keys as files: one open to the group or others is refused with the ``chmod`` to
run; ``sparkpoint.snapshot.signing`` generates a key (mode 0600) where none is given; and a
snapshot read by the state processor without settings is plain data unless a key verified
it (``Snapshot.pickle_allowed``, what ``SavepointReader`` ships to its tasks)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sparkpoint.checkpoint.metadata import CheckpointMetadata
from sparkpoint.checkpoint.metadata.file_format import store_checkpoint_metadata
from sparkpoint.checkpoint.trust import SnapshotTrust, default_signing_key_path
from sparkpoint.errors import ConfigurationError
from sparkpoint.state_processor.snapshot_reading import Snapshot


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o602])
def test_a_key_file_open_to_group_or_others_is_refused_with_the_chmod(
    tmp_path: Path, mode: int
) -> None:
    key_file = tmp_path / "key"
    key_file.write_bytes(b"secret\n")
    key_file.chmod(mode)
    with pytest.raises(ConfigurationError) as info:
        SnapshotTrust.from_config({"sparkpoint.snapshot.signing-key-file": str(key_file)})
    assert str(info.value) == (
        f"Refusing the snapshot signing key file '{key_file}' "
        f"(sparkpoint.snapshot.signing-key-file): its group or others may read or write it "
        f"(mode {mode:04o}), and whoever reads the key can sign snapshots this job trusts. "
        f"Run: chmod 600 {key_file}"
    )
    key_file.chmod(0o600)
    trust = SnapshotTrust.from_config({"sparkpoint.snapshot.signing-key-file": str(key_file)})
    assert trust.signing_key == b"secret"
    key_file.chmod(0o400)
    trust = SnapshotTrust.from_config({"sparkpoint.snapshot.signing-key-file": str(key_file)})
    assert trust.signing_key == b"secret"


def test_signing_without_a_key_generates_one_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    default = tmp_path / "config" / "sparkpoint" / "signing-key"
    assert default_signing_key_path() == str(default)
    assert not default.exists()
    first = SnapshotTrust.from_config({"sparkpoint.snapshot.signing": "true"})
    assert first.signing_key is not None and len(first.signing_key) == 64
    assert default.read_bytes() == first.signing_key + b"\n"
    assert _mode(default) == 0o600 and _mode(default.parent) == 0o700
    again = SnapshotTrust.from_config({"sparkpoint.snapshot.signing": "true"})
    assert again.signing_key == first.signing_key

    named = tmp_path / "keys" / "team.key"
    made = SnapshotTrust.from_config(
        {"sparkpoint.snapshot.signing": "true", "sparkpoint.snapshot.signing-key-file": str(named)}
    )
    assert made.signing_key is not None and made.signing_key != first.signing_key
    assert _mode(named) == 0o600
    # Without asking for signing, a missing key file is a mistake, never made up.
    with pytest.raises(ConfigurationError, match="Cannot read the snapshot signing key file"):
        SnapshotTrust.from_config({"sparkpoint.snapshot.signing-key-file": str(tmp_path / "x")})
    assert not (tmp_path / "x").exists()
    assert SnapshotTrust.from_config({}).signing_key is None


def test_the_state_processor_unpickles_only_verified_snapshots_by_default(tmp_path: Path) -> None:
    key = b"team key"
    for name, signing_key in (("unsigned", None), ("signed", key)):
        (tmp_path / name).mkdir()
        data = store_checkpoint_metadata(CheckpointMetadata(1), signing_key=signing_key)
        (tmp_path / name / "_metadata").write_bytes(data)
    assert Snapshot.load(str(tmp_path / "unsigned"), SnapshotTrust()).pickle_allowed is False
    assert Snapshot.load(str(tmp_path / "signed"), SnapshotTrust()).pickle_allowed is False
    assert Snapshot.load(str(tmp_path / "signed"), SnapshotTrust(key)).pickle_allowed is True
    opted_in = SnapshotTrust(None, allow_pickle=True)
    assert Snapshot.load(str(tmp_path / "unsigned"), opted_in).pickle_allowed is True
    refused = SnapshotTrust(key, allow_pickle=False)
    assert Snapshot.load(str(tmp_path / "signed"), refused).pickle_allowed is False
