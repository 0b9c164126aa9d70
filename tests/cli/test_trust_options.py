"""The CLI's trust options: ``--signing-key-file`` refuses unsigned or altered snapshots
(one line on stderr, exit 2; ``list`` shows them as corrupt and ``latest`` skips them),
``inspect`` says what protects a snapshot, and ``savepoint dump --no-pickle`` reads a
heap checkpoint of plain data exactly and refuses a crafted pickle before it runs.

Real heap snapshots written through real file-system storage; no Spark.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from sparkpoint.checkpoint.fs_storage import FsCheckpointStorageAccess
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.metadata import CheckpointMetadata, OperatorState, OperatorSubtaskState
from sparkpoint.checkpoint.metadata.file_format import write_metadata
from sparkpoint.checkpoint.properties import CheckpointProperties
from sparkpoint.checkpoint.trust import SnapshotTrust, use_by_default
from sparkpoint.cli.main import main
from sparkpoint.clock import SYSTEM_CLOCK
from sparkpoint.common.typeinfo import Types
from sparkpoint.datastream import FileSystemCheckpointStorage
from sparkpoint.state.backend import KeyedStateBackendParameters, SnapshotType
from sparkpoint.state.descriptors import ValueStateDescriptor
from sparkpoint.state.heap import HeapKeyedStateBackend, clear_heap_cache
from sparkpoint.state.pickling import set_allow_pickle
from sparkpoint.state.serializers import PickleSerializer
from tests.fixtures.crafted_pickle import Plant

JOB = "0123456789abcdef0123456789abcdef"
MAX_P = 8
KEY = b"team key"


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    clear_heap_cache()
    yield
    use_by_default(SnapshotTrust())
    set_allow_pickle(True)
    clear_heap_cache()


def _checkpoint(base: Path, n: int, values: dict[int, Any], signing_key: bytes | None) -> Path:
    """chk-N of one heap subtask holding ``values`` in an untyped ValueState (a file)."""
    access = FileSystemCheckpointStorage(str(base), file_state_size_threshold=0)
    storage = access.create_checkpoint_storage(JOB)
    assert isinstance(storage, FsCheckpointStorageAccess)
    storage.initialize_base_locations_for_checkpoint()
    location = storage.initialize_location_for_checkpoint(n)
    backend = HeapKeyedStateBackend(
        KeyedStateBackendParameters(
            "job",
            "op",
            0,
            1,
            MAX_P,
            KeyGroupRange(0, MAX_P - 1),
            str(base / f"local-{n}"),
            SYSTEM_CLOCK,
            None,
        )
    )
    state = backend.get_partitioned_state(ValueStateDescriptor("v", Types.PICKLED_BYTE_ARRAY()))
    for key, value in values.items():
        backend.set_current_key(key)
        state.update(value)
    handle = backend.snapshot(n, location, SnapshotType.CHECKPOINT)()
    backend.dispose()
    metadata = CheckpointMetadata(
        n,
        (OperatorState("op", 1, MAX_P, {0: OperatorSubtaskState((handle,))}),),
        (),
        CheckpointProperties.for_checkpoint("RETAIN_ON_CANCELLATION"),
    )
    return Path(write_metadata(location, metadata, signing_key=signing_key).external_pointer)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_signing_key_file_refuses_unsigned_and_altered_snapshots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY + b"\n")
    key_file.chmod(0o600)
    base = tmp_path / "checkpoints"
    values = {k: (k, f"v{k}") for k in range(30)}
    signed = _checkpoint(base, 1, values, KEY)
    unsigned = _checkpoint(base, 2, values, None)
    with_key = ("--signing-key-file", str(key_file))

    code, out, err = _run(capsys, *with_key, "checkpoints", "inspect", str(signed))
    assert code == 0 and err == ""
    assert "integrity:  signed, signature verified; 1 state files with a digest" in out

    code, out, _ = _run(capsys, "checkpoints", "inspect", str(signed))
    assert code == 0
    assert "signed (not verified: no signing key given); 1 state files with a digest" in out

    code, out, err = _run(capsys, *with_key, "checkpoints", "inspect", str(unsigned))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert f"Refusing unsigned checkpoint metadata file {unsigned / '_metadata'}" in err

    code, out, err = _run(capsys, *with_key, "checkpoints", "latest", str(base))
    assert (code, out.strip()) == (0, str(signed))  # chk-2 is unsigned: skipped, and said so
    assert err.startswith(f"sparkpoint: skipped {unsigned} (corrupt): Refusing unsigned")
    assert err.count("\n") == 1
    code, out, _ = _run(capsys, *with_key, "checkpoints", "list", "--json", str(base))
    listed = {entry["path"]: entry for entry in json.loads(out)}
    assert code == 0 and listed[str(signed)]["status"] == "complete"
    assert listed[str(unsigned)]["status"] == "corrupt"
    assert "Refusing unsigned checkpoint metadata file" in listed[str(unsigned)]["error"]

    data = bytearray((signed / "_metadata").read_bytes())
    data[len(data) // 2] ^= 1
    (signed / "_metadata").write_bytes(bytes(data))
    code, _, err = _run(capsys, *with_key, "checkpoints", "inspect", str(signed))
    assert code == 2 and "signature does not match" in err

    code, _, err = _run(
        capsys,
        "--signing-key-file",
        str(tmp_path / "absent"),
        "checkpoints",
        "inspect",
        str(unsigned),
    )
    assert code == 2
    assert f"Cannot read the snapshot signing key file '{tmp_path / 'absent'}'" in err


def test_dump_without_pickle_reads_plain_data_and_refuses_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "marker"
    base = tmp_path / "checkpoints"
    plain = _checkpoint(base, 1, {k: (k, [k, None], {"k": k}) for k in range(40)}, None)
    code, _, err = _run(
        capsys, "--no-pickle", "savepoint", "dump", str(plain), "-o", str(tmp_path / "dump")
    )
    assert (code, err) == (0, "")
    table = pq.read_table(tmp_path / "dump" / "op.parquet")
    decode = PickleSerializer().deserialize
    values = sorted(decode(v) for v in table.column("value").to_pylist())
    assert values == [(k, [k, None], {"k": k}) for k in range(40)]

    crafted = _checkpoint(base, 2, {1: 1, 2: Plant(marker), 3: 3}, None)
    code, _, err = _run(
        capsys, "--no-pickle", "savepoint", "dump", str(crafted), "-o", str(tmp_path / "dump2")
    )
    assert code == 2 and err.count("\n") == 1
    assert "Refusing to unpickle" in err and "it names io.open" in err
    assert not marker.exists()
    assert not os.path.exists(tmp_path / "dump2" / "op.parquet")


def test_dump_reads_a_snapshot_from_elsewhere_as_plain_data_unless_signed_or_opted_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No option: an unsigned snapshot's pickles that name code are refused, naming the
    opt-in; ``--allow-pickle`` (the opt-in) or a verified signature reads them."""
    marker = tmp_path / "marker"
    base = tmp_path / "checkpoints"
    crafted = _checkpoint(base, 1, {1: 1, 2: Plant(marker), 3: 3}, None)
    code, out, err = _run(capsys, "savepoint", "dump", str(crafted), "-o", str(tmp_path / "d1"))
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "Refusing to unpickle" in err and "it names io.open" in err
    assert "set sparkpoint.snapshot.allow-pickle=true (CLI: --allow-pickle)" in err
    assert not marker.exists()

    values = {k: Fraction(k, 7) for k in range(1, 30)}  # pickles that name a class
    unsigned = _checkpoint(base, 2, values, None)
    code, _, err = _run(capsys, "savepoint", "dump", str(unsigned), "-o", str(tmp_path / "d2"))
    assert code == 2 and "it names fractions.Fraction" in err

    decode = PickleSerializer().deserialize
    code, _, err = _run(
        capsys, "--allow-pickle", "savepoint", "dump", str(unsigned), "-o", str(tmp_path / "d3")
    )
    assert (code, err) == (0, "")
    dumped = pq.read_table(tmp_path / "d3" / "op.parquet").column("value").to_pylist()
    assert sorted(decode(v) for v in dumped) == sorted(values.values())

    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    key_file.chmod(0o600)
    signed = _checkpoint(base, 3, values, KEY)
    code, _, err = _run(
        capsys,
        "--signing-key-file",
        str(key_file),
        "savepoint",
        "dump",
        str(signed),
        "-o",
        str(tmp_path / "d4"),
    )
    assert (code, err) == (0, "")
    dumped = pq.read_table(tmp_path / "d4" / "op.parquet").column("value").to_pylist()
    assert sorted(decode(v) for v in dumped) == sorted(values.values())


def test_a_signing_key_file_open_to_others_is_refused_with_the_chmod_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    key_file.chmod(0o644)
    signed = _checkpoint(tmp_path / "checkpoints", 1, {1: 1}, KEY)
    code, out, err = _run(
        capsys, "--signing-key-file", str(key_file), "checkpoints", "inspect", str(signed)
    )
    assert (code, out) == (2, "")
    assert (
        f"Refusing the snapshot signing key file '{key_file}' "
        "(sparkpoint.snapshot.signing-key-file): its group or others may read or write it "
        "(mode 0644), and whoever reads the key can sign snapshots this job trusts. "
        f"Run: chmod 600 {key_file}"
    ) in err
