"""State files carry a SHA-256 in their handles, verified on every read; impossible key-group
offsets are refused when ``_metadata`` is read; a signing key makes ``_metadata`` carry an
HMAC-SHA256, and readers with the key refuse what is unsigned or altered.

Real file-system streams write the files; ``_metadata`` bytes come from the real serializer.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from sparkpoint.checkpoint.fs_streams import FsCheckpointStreamFactory
from sparkpoint.checkpoint.handles import (
    ByteStreamStateHandle,
    FileStateHandle,
    KeyGroupRangeOffsets,
    KeyGroupsStateHandle,
    OperatorStateHandle,
    RelativeFileStateHandle,
    StateMetaInfo,
)
from sparkpoint.checkpoint.integrity import integrity_summary
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.metadata import CheckpointMetadata, OperatorState, OperatorSubtaskState
from sparkpoint.checkpoint.metadata.file_format import (
    is_signed,
    load_checkpoint_metadata,
    store_checkpoint_metadata,
)
from sparkpoint.checkpoint.trust import SnapshotTrust
from sparkpoint.errors import (
    ConfigurationError,
    CorruptStateError,
    MetadataFormatError,
    SnapshotSignatureError,
)
from sparkpoint.fs import get_filesystem

KEY = b"0123456789abcdef-signing-key"
SIGNED = SnapshotTrust(KEY)


def _write(directory: Path, data: bytes, threshold: int = 16) -> FileStateHandle | None:
    fs = get_filesystem(str(directory))
    factory = FsCheckpointStreamFactory(fs, str(directory), str(directory), threshold, 64)
    stream = factory.create_checkpoint_state_output_stream()
    # Small and large writes: the buffer path and the direct path are both hashed.
    stream.write(data[:10])
    stream.write(data[10:])
    handle = stream.close_and_get_handle()
    assert handle is None or isinstance(handle, ByteStreamStateHandle | FileStateHandle)
    return handle if isinstance(handle, FileStateHandle) else None


def _metadata(delegate: FileStateHandle, offsets: tuple[int, ...]) -> CheckpointMetadata:
    kgr = KeyGroupRange(0, len(offsets) - 1)
    keyed = KeyGroupsStateHandle(KeyGroupRangeOffsets(kgr, offsets), delegate, "h")
    op = OperatorState("op", 1, 128, {0: OperatorSubtaskState((keyed,))})
    return CheckpointMetadata(5, (op,))


# ---- digests -------------------------------------------------------------------------


def test_file_streams_record_the_sha256_of_their_bytes(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40
    handle = _write(tmp_path, data)
    assert isinstance(handle, RelativeFileStateHandle)
    assert handle.digest == hashlib.sha256(data).digest()
    assert Path(handle.path).read_bytes() == data
    assert handle.read_all() == data
    with handle.open_input_stream() as stream:
        stream.seek(1000)
        assert stream.read(5) == data[1000:1005]
    inline = FsCheckpointStreamFactory(
        get_filesystem(str(tmp_path)), str(tmp_path), str(tmp_path), 100, 100
    ).create_checkpoint_state_output_stream()
    inline.write(b"small")
    assert isinstance(inline.close_and_get_handle(), ByteStreamStateHandle)  # no digest: CRC'd


def test_the_digest_survives_metadata_and_an_old_file_without_digests_still_reads(
    tmp_path: Path,
) -> None:
    data = b"x" * 500
    handle = _write(tmp_path, data)
    assert handle is not None
    md = _metadata(handle, (0,))
    loaded = load_checkpoint_metadata(store_checkpoint_metadata(md), str(tmp_path), "m")
    (restored,) = loaded.operator_states[0].subtask_states[0].managed_keyed_state
    assert isinstance(restored, KeyGroupsStateHandle)
    assert isinstance(restored.delegate, FileStateHandle)
    assert restored.delegate.digest == hashlib.sha256(data).digest()
    summary = integrity_summary(store_checkpoint_metadata(md), loaded, SnapshotTrust())
    assert summary == {
        "signature": "none",
        "state_files_with_digest": 1,
        "state_files_without_digest": 0,
    }

    old = _metadata(RelativeFileStateHandle(handle.path, handle.size, handle.relative_path), (0,))
    old_bytes = store_checkpoint_metadata(old)
    assert len(old_bytes) == len(store_checkpoint_metadata(md)) - 32 - 4  # old tag: no digest
    loaded_old = load_checkpoint_metadata(old_bytes, str(tmp_path), "m")
    (old_handle,) = loaded_old.operator_states[0].subtask_states[0].managed_keyed_state
    assert old_handle.delegate.digest is None  # type: ignore[attr-defined]
    assert old_handle.delegate.read_all() == data  # type: ignore[attr-defined]
    assert (
        integrity_summary(old_bytes, loaded_old, SnapshotTrust())["state_files_without_digest"] == 1
    )


@pytest.mark.parametrize("position", [0, 1, 250, 499])
def test_a_flipped_bit_in_a_state_file_is_an_error_naming_the_file(
    tmp_path: Path, position: int
) -> None:
    handle = _write(tmp_path, bytes(500))
    assert handle is not None
    path = Path(handle.path)
    corrupt = bytearray(path.read_bytes())
    corrupt[position] ^= 0x04
    path.write_bytes(bytes(corrupt))
    with pytest.raises(CorruptStateError, match=f"State file {path} is corrupt"):
        handle.read_all()
    with pytest.raises(CorruptStateError, match=str(path)):
        handle.open_input_stream()
    target = tmp_path / "copy"
    with pytest.raises(CorruptStateError, match=str(path)):
        handle.copy_to_local(str(target))
    assert not target.exists()  # the unverified copy is gone


def test_a_truncated_or_grown_state_file_is_an_error_naming_the_file(tmp_path: Path) -> None:
    handle = _write(tmp_path, bytes(500))
    assert handle is not None
    path = Path(handle.path)
    path.write_bytes(bytes(499))
    with pytest.raises(CorruptStateError, match=f"{path} has 499 bytes, but .* records 500"):
        handle.read_all()
    path.write_bytes(bytes(501))
    with pytest.raises(CorruptStateError, match=f"{path} has 501 bytes"):
        handle.open_input_stream()


# ---- impossible offsets ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("offsets", "message"),
    [
        ((10, -5, 20), "key group 1 of state file .*: offset -5 is negative"),
        (
            (10, 20, 500),
            "key group 2 of state file .*: offset 500 lies beyond the end of the 500-byte stream",
        ),
        ((10, 300, 20), "key group 2 of state file .*: offset 20 comes before the previous"),
        ((-2, 10, 20), "key group 0 .*offset -2 is negative"),
    ],
)
def test_impossible_key_group_offsets_are_refused_naming_file_and_key_group(
    tmp_path: Path, offsets: tuple[int, ...], message: str
) -> None:
    handle = _write(tmp_path, bytes(500))
    assert handle is not None
    data = store_checkpoint_metadata(_metadata(handle, offsets))
    with pytest.raises(MetadataFormatError, match=message) as info:
        load_checkpoint_metadata(data, str(tmp_path), str(tmp_path / "_metadata"))
    assert f"checkpoint metadata file {tmp_path / '_metadata'}" in str(info.value)
    assert handle.path in str(info.value)
    # Empty key groups (-1) and increasing offsets inside the stream are fine.
    ok = store_checkpoint_metadata(_metadata(handle, (10, -1, 499)))
    load_checkpoint_metadata(ok, str(tmp_path))


def test_operator_state_offsets_outside_the_stream_are_refused() -> None:
    delegate = ByteStreamStateHandle("op-state", b"0123456789")
    for offsets, ok in (((0, 9), True), ((0, 10), False), ((-1,), False)):
        handle = OperatorStateHandle(
            {"s": StateMetaInfo(offsets, OperatorStateHandle.Mode.BROADCAST)}, delegate
        )
        op = OperatorState(
            "op", 1, 128, {0: OperatorSubtaskState(managed_operator_state=(handle,))}
        )
        data = store_checkpoint_metadata(CheckpointMetadata(1, (op,)))
        if ok:
            load_checkpoint_metadata(data, None)
            continue
        with pytest.raises(MetadataFormatError, match="operator state 's' of inline stream"):
            load_checkpoint_metadata(data, None)


# ---- signatures ------------------------------------------------------------------------


def _signed_sample(tmp_path: Path) -> tuple[bytes, FileStateHandle]:
    handle = _write(tmp_path, bytes(range(200)))
    assert handle is not None
    return store_checkpoint_metadata(_metadata(handle, (0,)), signing_key=KEY), handle


def test_a_signed_metadata_loads_with_its_key_and_without_one(tmp_path: Path) -> None:
    data, handle = _signed_sample(tmp_path)
    unsigned = store_checkpoint_metadata(_metadata(handle, (0,)))
    assert len(data) == len(unsigned) + 36 and data.startswith(unsigned)
    assert is_signed(data) and not is_signed(unsigned)
    with_key = load_checkpoint_metadata(data, str(tmp_path), "m", trust=SIGNED)
    without_key = load_checkpoint_metadata(data, str(tmp_path), "m", trust=SnapshotTrust())
    assert with_key == without_key == load_checkpoint_metadata(unsigned, str(tmp_path), "m")
    assert integrity_summary(data, with_key, SIGNED)["signature"] == "verified"
    assert integrity_summary(data, with_key, SnapshotTrust())["signature"] == "not verified"


def test_every_changed_byte_of_a_signed_metadata_is_refused_with_the_key(tmp_path: Path) -> None:
    data, _ = _signed_sample(tmp_path)
    refused = 0
    for position in range(len(data)):
        for bit in (0x01, 0x80):
            tampered = bytearray(data)
            tampered[position] ^= bit
            with pytest.raises(MetadataFormatError, match="checkpoint metadata file /m"):
                load_checkpoint_metadata(bytes(tampered), str(tmp_path), "/m", trust=SIGNED)
            refused += 1
    assert refused == 2 * len(data)


def test_a_changed_digest_with_a_recomputed_crc_is_refused_by_the_signature(
    tmp_path: Path,
) -> None:
    """What an attacker who rewrites a state file must do: put the new file's digest into
    ``_metadata`` and recompute its CRC. Without a key that passes; with one it does not."""
    data, handle = _signed_sample(tmp_path)
    unsigned_len = len(data) - 36
    forged_handle = FileStateHandle(handle.path, handle.size, digest=hashlib.sha256(b"x").digest())
    forged = store_checkpoint_metadata(_metadata(forged_handle, (0,)))
    assert len(forged) != unsigned_len or forged != data[:unsigned_len]
    load_checkpoint_metadata(forged, str(tmp_path), "m")  # no key: accepted (CRC is no MAC)
    with pytest.raises(SnapshotSignatureError, match="Refusing unsigned checkpoint metadata"):
        load_checkpoint_metadata(forged, str(tmp_path), "m", trust=SIGNED)
    resigned = forged + data[unsigned_len:]  # the old signature on the new content
    with pytest.raises(SnapshotSignatureError, match="signature does not match"):
        load_checkpoint_metadata(resigned, str(tmp_path), "m", trust=SIGNED)
    other_key = store_checkpoint_metadata(_metadata(handle, (0,)), signing_key=b"another key")
    with pytest.raises(SnapshotSignatureError, match="signature does not match"):
        load_checkpoint_metadata(other_key, str(tmp_path), "m", trust=SIGNED)


def test_trailing_bytes_that_are_no_signature_are_refused(tmp_path: Path) -> None:
    data, _ = _signed_sample(tmp_path)
    with pytest.raises(MetadataFormatError, match="trailing bytes"):
        load_checkpoint_metadata(data + b"\x00", str(tmp_path), "m")
    broken_magic = data[:-36] + b"SPKX" + data[-32:]
    with pytest.raises(MetadataFormatError, match="trailing bytes"):
        load_checkpoint_metadata(broken_magic, str(tmp_path), "m")


# ---- the keys --------------------------------------------------------------------------


def test_trust_settings_from_the_configuration(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_bytes(b"  file-key\n")
    key_file.chmod(0o600)
    assert SnapshotTrust.from_config({}) == SnapshotTrust(None, None)
    assert SnapshotTrust.from_config({"sparkpoint.snapshot.signing-key": "k1"}).signing_key == (
        b"k1"
    )
    from_file = SnapshotTrust.from_config(
        {
            "sparkpoint.snapshot.signing-key-file": str(key_file),
            "sparkpoint.snapshot.allow-pickle": "false",
        }
    )
    assert from_file.signing_key == b"file-key" and from_file.allow_pickle is False
    assert "file-key" not in repr(from_file)
    bad = [
        (
            {
                "sparkpoint.snapshot.signing-key": "k",
                "sparkpoint.snapshot.signing-key-file": str(key_file),
            },
            "Both sparkpoint.snapshot.signing-key and sparkpoint.snapshot.signing-key-file",
        ),
        ({"sparkpoint.snapshot.signing-key": " "}, "sparkpoint.snapshot.signing-key is empty"),
        (
            {"sparkpoint.snapshot.signing-key-file": str(tmp_path / "absent")},
            f"Cannot read the snapshot signing key file '{tmp_path / 'absent'}'",
        ),
        ({"sparkpoint.snapshot.allow-pickle": "maybe"}, "sparkpoint.snapshot.allow-pickle"),
    ]
    empty = tmp_path / "empty"
    empty.write_bytes(b"\n")
    empty.chmod(0o600)
    bad.append(({"sparkpoint.snapshot.signing-key-file": str(empty)}, "is empty"))
    for config, message in bad:
        with pytest.raises(ConfigurationError, match=message):
            SnapshotTrust.from_config(config)
