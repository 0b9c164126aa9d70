"""The ``sparkpoint`` command's contract on untrusted input (issue 29, measured item 7).

Every subcommand (``checkpoints list|latest|history|inspect``, ``savepoint dump``) is run on
a directory of good checkpoints in which one ``_metadata`` is a FIFO, a socket, a link (to
``/dev/zero`` or to a good file), larger than ``MAX_METADATA_SIZE``, corrupt, or crafted
with a valid checksum and odd content. ``list``, ``latest`` and ``history`` answer from the
good ones and report the bad one in one line on stderr; ``inspect`` and ``dump`` exit 2
with one line; nothing hangs (a watchdog alarm fails the test) and nothing prints a
traceback. Whatever comes from a snapshot is printed with its control characters, escape
sequences and bidi overrides escaped. No Spark: checkpoints are written with the storage
and metadata APIs as the job master writes them.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import pytest

from sparkpoint.checkpoint.fs_storage import FsCheckpointStorageAccess
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.metadata import (
    CheckpointMetadata,
    MasterState,
    OperatorState,
    OperatorSubtaskState,
)
from sparkpoint.checkpoint.metadata.file_format import (
    HEADER_SIZE,
    TRAILER_SIZE,
    encode_frame,
    load_checkpoint,
    store_checkpoint_metadata,
    write_metadata,
)
from sparkpoint.checkpoint.metadata.payload_io import PayloadWriter
from sparkpoint.checkpoint.properties import CheckpointProperties
from sparkpoint.checkpoint.stats import STATS_MASTER_STATE
from sparkpoint.checkpoint.storage import (
    MAX_METADATA_SIZE,
    read_metadata_file,
    write_metadata_bytes,
)
from sparkpoint.cli.exit_codes import EXIT_ERROR
from sparkpoint.cli.main import main
from sparkpoint.datastream.checkpoint_storage import FileSystemCheckpointStorage
from sparkpoint.errors import StorageError
from sparkpoint.state_processor.snapshot_reading import Snapshot
from tests.cli.test_cli import JOB, storage_access, write_checkpoint, write_savepoint
from tests.fixtures.checkpoints import keyed_handle

WATCHDOG_SECONDS = 20


class Hung(BaseException):
    """Raised by the watchdog alarm: a command blocked (on a FIFO, a device...)."""


@contextlib.contextmanager
def watchdog(what: str) -> Iterator[None]:
    """Fail with ``Hung`` (not an ``Exception``: nothing catches it) if the block blocks."""

    def alarm(signum: int, frame: FrameType | None) -> None:
        raise Hung(f"{what} did not return in {WATCHDOG_SECONDS} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(WATCHDOG_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the command in-process under a watchdog; returns exit code, stdout, stderr."""
    with watchdog(f"sparkpoint {' '.join(argv)}"):
        code = main(list(argv))
    out, err = capsys.readouterr()
    assert_printable(out + err)
    return code, out, err


def assert_printable(text: str) -> None:
    """No character a terminal would act on: only printable ones and line breaks."""
    bad = sorted({c for c in text if not c.isprintable() and c != "\n"})
    assert not bad, f"unescaped characters {bad!r} in {text!r}"


def one_line(err: str, prefix: str, *parts: str) -> None:
    """``err`` is exactly one line, starting with ``prefix`` and holding every part."""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith(prefix), err
    for part in parts:
        assert part in err, (part, err)
    assert "Traceback" not in err


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """``<base>/<job>/chk-1..3``, each complete with one keyed operator."""
    root = tmp_path / "checkpoints"
    access = storage_access(root)
    for n in (1, 2, 3):
        write_checkpoint(access, n)
    return root


def chk(base: Path, n: int) -> Path:
    return base / JOB / f"chk-{n}"


def assert_the_others_answer(
    capsys: pytest.CaptureFixture[str], base: Path, status: str, why: str
) -> None:
    """``list``, ``latest`` and ``history`` skip chk-3, report it once, answer from 1 and 2."""
    bad = chk(base, 3)
    skipped = f"sparkpoint: skipped {bad} ({status}"

    code, out, err = run(capsys, "checkpoints", "list", str(base))
    assert code == 0
    one_line(err, skipped, why)
    rows = [line.split() for line in out.splitlines()[1:]]
    assert [(r[0], r[2]) for r in rows] == [("1", "complete"), ("2", "complete"), ("3", status)]

    code, out, err = run(capsys, "checkpoints", "list", str(base), "--json")
    assert code == 0
    one_line(err, skipped, why)
    entries = json.loads(out)
    assert [e["status"] for e in entries] == ["complete", "complete", status]
    assert why in entries[2]["error"]

    code, out, err = run(capsys, "checkpoints", "latest", str(base))
    assert (code, out) == (0, f"{chk(base, 2)}\n")
    one_line(err, skipped, why)

    code, out, err = run(capsys, "checkpoints", "history", str(base), "--json")
    assert code == 0
    one_line(err, skipped, why)
    assert [row["id"] for row in json.loads(out)] == [1, 2]

    code, out, err = run(capsys, "checkpoints", "history", str(base))
    assert code == 0
    one_line(err, skipped, why)
    assert (
        out.splitlines()[-1]
        == "2 retained checkpoint(s); 1 skipped: _metadata not readable (see stderr)"
    )


def assert_refused(
    capsys: pytest.CaptureFixture[str], pointer: Path, output: Path, *parts: str
) -> None:
    """``inspect`` (text and JSON) and ``dump`` exit 2 with one line; nothing is written."""
    for argv in (
        ("checkpoints", "inspect", str(pointer)),
        ("checkpoints", "inspect", str(pointer), "--json"),
        ("savepoint", "dump", str(pointer), "-o", str(output)),
    ):
        code, out, err = run(capsys, *argv)
        assert (code, out) == (EXIT_ERROR, ""), argv
        one_line(err, "sparkpoint: error: ", *parts)
    assert not output.exists()


# ---- a _metadata that is not a regular file, or too large -------------------------------------


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path) -> None:
    # AF_UNIX paths are short (108 bytes): bind by a name relative to the directory.
    cwd = os.getcwd()
    os.chdir(path.parent)
    try:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(path.name)
        sock.close()
    finally:
        os.chdir(cwd)


def _link_to_dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _link_to_good_metadata(path: Path) -> None:
    good = path.parent / "good_metadata"
    good.write_bytes((path.parent.parent / "chk-2" / "_metadata").read_bytes())
    path.symlink_to(good)


def _too_large(path: Path) -> None:
    with open(path, "wb") as f:  # sparse: nothing is written, the size is what counts
        f.truncate(MAX_METADATA_SIZE + 1)


def _flipped_bit(path: Path) -> None:
    data = bytearray((path.parent.parent / "chk-2" / "_metadata").read_bytes())
    data[HEADER_SIZE + 3] ^= 0x10
    path.write_bytes(bytes(data))


TOO_LARGE = (
    f"holds {MAX_METADATA_SIZE + 1} bytes, more than the {MAX_METADATA_SIZE} bytes (128 MiB)"
)

# name -> (make the _metadata, list's status, why list says, why inspect and dump say)
BAD_FILES: dict[str, tuple[Callable[[Path], None], str, str, str]] = {
    "fifo": (_fifo, "unreadable", "it is a FIFO (named pipe)", "it is a FIFO (named pipe)"),
    "socket": (_socket, "unreadable", "it is a socket", "it is a socket"),
    # inspect's pointer resolution follows the link to size the file: it finds the device
    "link-to-dev-zero": (
        _link_to_dev_zero,
        "unreadable",
        "it is a symbolic link",
        "it is a character device",
    ),
    "link-to-a-good-metadata": (
        _link_to_good_metadata,
        "unreadable",
        "it is a symbolic link",
        "it is a symbolic link",
    ),
    "too-large": (_too_large, "unreadable", TOO_LARGE, TOO_LARGE),
    "flipped-bit": (_flipped_bit, "corrupt", "checksum mismatch", "checksum mismatch"),
}


@pytest.mark.parametrize("kind", list(BAD_FILES))
def test_one_bad_metadata_file_among_good_ones(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, base: Path, kind: str
) -> None:
    make, status, why_listed, why_read = BAD_FILES[kind]
    metadata = chk(base, 3) / "_metadata"
    metadata.unlink()
    make(metadata)
    assert_the_others_answer(capsys, base, status, why_listed)
    assert_refused(capsys, chk(base, 3), tmp_path / "dump", why_read)
    assert_refused(capsys, metadata, tmp_path / "dump", why_read)


def test_a_device_as_the_pointer(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert_refused(
        capsys, Path("/dev/zero"), tmp_path / "dump", "/dev/zero", "it is a character device"
    )
    for action in ("list", "latest", "history"):
        code, out, err = run(capsys, "checkpoints", action, "/dev/zero")
        assert (code, out) == (EXIT_ERROR, "")
        one_line(err, "sparkpoint: error: ", "'/dev/zero' is not a directory")


def test_restore_and_the_state_processor_read_through_the_same_checks(base: Path) -> None:
    """The reading path is shared: a job's restore (``load_checkpoint`` through its
    storage) and the state processor refuse a FIFO without blocking, and a device."""
    metadata = chk(base, 3) / "_metadata"
    metadata.unlink()
    os.mkfifo(metadata)
    storage = FileSystemCheckpointStorage(str(base))
    with watchdog("reading a FIFO _metadata"):
        with pytest.raises(StorageError, match=r"it is a FIFO \(named pipe\)"):
            load_checkpoint(storage, str(chk(base, 3)))
        with pytest.raises(StorageError, match=r"it is a FIFO \(named pipe\)"):
            Snapshot.load(str(chk(base, 3)))
        with pytest.raises(StorageError, match="/dev/zero as a checkpoint _metadata: it is a"):
            read_metadata_file("/dev/zero")
    assert load_checkpoint(storage, str(chk(base, 2)))[0].checkpoint_id == 2


def test_a_metadata_over_the_cap_is_never_written(tmp_path: Path) -> None:
    access = storage_access(tmp_path / "c")
    location = access.initialize_location_for_checkpoint(1)
    with pytest.raises(StorageError, match=f"of {MAX_METADATA_SIZE + 1} bytes: more than the"):
        write_metadata_bytes(location, bytes(MAX_METADATA_SIZE + 1))
    assert not (tmp_path / "c" / JOB / "chk-1" / "_metadata").exists()


# ---- crafted _metadata: checksum-valid, odd content --------------------------------------------

Writer = Callable[[PayloadWriter], None]


def _inline_keyed(
    start: int = 0, count: int = 2, offsets: tuple[int, ...] | None = None, tag: int = 3
) -> Writer:
    def write(w: PayloadWriter) -> None:
        w.u8(tag)  # KEY_GROUPS
        w.i32(start)
        w.i32(count)
        for offset in (0,) * count if offsets is None else offsets:
            w.i64(offset)
        w.u8(1)  # BYTE_STREAM
        w.text("inline")
        w.raw(b"x" * 8)
        w.text("h")

    return write


def _file_keyed(path: str) -> Writer:
    def write(w: PayloadWriter) -> None:
        w.u8(3)
        w.i32(0)
        w.i32(1)
        w.i64(0)
        w.u8(2)  # FILE_STREAM
        w.i64(8)
        w.text(path)
        w.text("h")

    return write


def _operator(
    op_id: str | bytes = "op",
    parallelism: int = 1,
    max_parallelism: int = 128,
    subtasks: tuple[tuple[int, tuple[Writer, ...]], ...] = ((0, (_inline_keyed(),)),),
) -> Writer:
    def write(w: PayloadWriter) -> None:
        if isinstance(op_id, bytes):
            w.raw(op_id)
        else:
            w.text(op_id)
        w.i32(parallelism)
        w.i32(max_parallelism)
        w.u8(0)  # no coordinator state
        w.u32(len(subtasks))
        for index, keyed in subtasks:
            w.i32(index)
            w.u8(0)
            w.u32(len(keyed))
            for handle in keyed:
                handle(w)
            for _ in range(3):  # raw keyed, managed and raw operator state
                w.u32(0)

    return write


def payload(
    checkpoint_id: int = 3,
    checkpoint_type: int = 0,
    masters: tuple[tuple[str, bytes], ...] = (),
    operators: tuple[Writer, ...] = (_operator(),),
    operator_count: int | None = None,
    master_count: int | None = None,
) -> bytes:
    """A version-2 payload written field by field, so that any field may hold anything."""
    w = PayloadWriter()
    w.i64(checkpoint_id)
    w.u8(1)
    w.u8(checkpoint_type)
    w.u8(0b0000110)  # discard subsumed and finished
    w.u32(len(masters) if master_count is None else master_count)
    for name, data in masters:
        w.text(name)
        w.i32(1)
        w.raw(data)
    w.u32(len(operators) if operator_count is None else operator_count)
    for op in operators:
        op(w)
    return bytes(w.buf)


def _huge_key_groups(w: PayloadWriter) -> None:
    w.u8(3)
    w.i32(0)
    w.i32(2**31 - 1)  # no offsets follow


def _huge_string(w: PayloadWriter) -> None:
    w.u32(0xFFFFFFFF)  # the operator id's length


VALID = payload()

# name -> (payload, what the one-line error says)
CRAFTED: dict[str, tuple[bytes, str]] = {
    "empty-payload": (b"", "checkpoint id needs 8 bytes"),
    "cut-in-the-header-fields": (VALID[:9], "checkpoint type needs 1 bytes"),
    "cut-in-an-operator": (VALID[:-7], "malformed payload"),
    "trailing-payload-bytes": (VALID + b"\0", "1 unexpected bytes after the last operator"),
    "negative-checkpoint-id": (payload(checkpoint_id=-1), "checkpoint_id must be >= 0"),
    "unknown-checkpoint-type": (payload(checkpoint_type=77), "unknown checkpoint type 77"),
    "huge-master-count": (
        payload(master_count=0xFFFFFFFF),
        "number of master states 4294967295 exceeds the bytes left",
    ),
    "huge-operator-count": (
        payload(operator_count=0xFFFFFFFF),
        "number of operators 4294967295 exceeds the bytes left",
    ),
    "huge-key-group-count": (
        payload(operators=(_operator(subtasks=((0, (_huge_key_groups,)),)),)),
        "2147483647 key-group offsets exceed the bytes left",
    ),
    "huge-string-length": (
        payload(operators=(_huge_string,)),
        "operator id needs 4294967295 bytes",
    ),
    "operator-id-not-utf8": (
        payload(operators=(_operator(op_id=b"\xff\xfe"),)),
        "operator id is not valid UTF-8",
    ),
    "negative-parallelism": (
        payload(operators=(_operator(parallelism=-1, subtasks=()),)),
        "parallelism must be >= 1",
    ),
    "max-parallelism-below-parallelism": (
        payload(operators=(_operator(parallelism=4, max_parallelism=2),)),
        "max parallelism 2 is below parallelism 4",
    ),
    "subtask-index-out-of-range": (
        payload(operators=(_operator(subtasks=((5, ()),)),)),
        "subtask index 5 outside [0, 1)",
    ),
    "duplicate-operator": (
        payload(operators=(_operator(), _operator())),
        "Operator id 'op' appears twice",
    ),
    "unknown-handle-type": (
        payload(operators=(_operator(subtasks=((0, (_inline_keyed(tag=99),)),)),)),
        "unknown keyed state handle type 99",
    ),
    "negative-key-group": (
        payload(operators=(_operator(subtasks=((0, (_inline_keyed(start=-4),)),)),)),
        "invalid key-group range start=-4",
    ),
    "state-file-outside-the-snapshot": (
        payload(operators=(_operator(subtasks=((0, (_file_keyed("/etc/passwd"),)),)),)),
        "Refusing state path '/etc/passwd'",
    ),
}


@pytest.mark.parametrize("name", list(CRAFTED))
def test_crafted_metadata_for_every_subcommand(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, base: Path, name: str
) -> None:
    data, why = CRAFTED[name]
    metadata = chk(base, 3) / "_metadata"
    metadata.write_bytes(encode_frame(2, data))
    assert_the_others_answer(capsys, base, "corrupt", why)
    assert_refused(capsys, chk(base, 3), tmp_path / "dump", f"file {metadata}: ", why)


def test_truncated_files_for_every_subcommand(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, base: Path
) -> None:
    metadata = chk(base, 3) / "_metadata"
    whole = metadata.read_bytes()
    for size in (0, 3, 4, 19, HEADER_SIZE, len(whole) // 2, len(whole) - TRAILER_SIZE):
        metadata.write_bytes(whole[:size])
        assert_the_others_answer(capsys, base, "corrupt", f"truncated at byte offset {size}")
        assert_refused(capsys, chk(base, 3), tmp_path / "dump", "truncated at byte offset")


def _stats(value: object) -> bytes:
    return value if isinstance(value, bytes) else json.dumps(value).encode()


# name -> (the stored statistics, what history's report says); each is checksum-valid JSON
ODD_STATISTICS: dict[str, tuple[bytes, str]] = {
    "a-list": (b"[]", "a JSON object is expected, found list"),
    "a-string": (b'"text"', "a JSON object is expected, found str"),
    "null": (b"null", "a JSON object is expected, found NoneType"),
    "subtasks-an-object": (_stats({"subtasks": {}}), "field 'subtasks' must be list"),
    "subtask-a-number": (_stats({"subtasks": [1]}), "subtasks[0] must be an object"),
    "subtask-without-fields": (_stats({"subtasks": [{}]}), "field 'operator_id' is missing"),
    "operator-id-a-number": (
        _stats({"subtasks": [{"operator_id": 5, "subtask": 0}]}),
        "field 'operator_id' must be str, found int 5",
    ),
    "subtask-negative": (
        _stats({"subtasks": [{"operator_id": "op", "subtask": -2}]}),
        "field 'subtask' is -2, outside",
    ),
    "infinite-time": (
        b'{"trigger_timestamp_ms": 1e400}',
        "field 'trigger_timestamp_ms' must be an integer, found float inf",
    ),
    "time-past-year-9999": (
        _stats({"trigger_timestamp_ms": 10**20}),
        "field 'trigger_timestamp_ms' is 100000000000000000000, outside",
    ),
    "duration-a-string": (
        _stats({"duration_ms": "5"}),
        "field 'duration_ms' must be an integer, found str '5'",
    ),
    "epoch-a-boolean": (_stats({"epoch": True}), "field 'epoch' must be an integer, found bool"),
    "negative-size": (_stats({"state_size": -3}), "field 'state_size' is -3, outside"),
    "nested-5000-deep": (b"[" * 5000 + b"]" * 5000, "not JSON"),
    "not-utf8": (b"\xff\xfe{}", "not JSON"),
    "a-5000-digit-number": (b"1" * 5000, "not JSON"),
}


@pytest.mark.parametrize("name", list(ODD_STATISTICS))
def test_odd_statistics_for_every_subcommand(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, base: Path, name: str
) -> None:
    """The frame and payload are valid; the stored statistics are not what the coordinator
    writes. ``history`` skips the checkpoint with one line; the others show it as is."""
    data, why = ODD_STATISTICS[name]
    metadata = chk(base, 3) / "_metadata"
    metadata.write_bytes(encode_frame(2, payload(masters=((STATS_MASTER_STATE, data),))))

    for argv in (("history", str(base)), ("history", str(base), "--json")):
        code, out, err = run(capsys, "checkpoints", *argv)
        assert code == 0
        one_line(err, f"sparkpoint: skipped {chk(base, 3)} (statistics): ", why)
    assert [row["id"] for row in json.loads(out)] == [1, 2]

    code, out, err = run(capsys, "checkpoints", "latest", str(base))
    assert (code, out, err) == (0, f"{chk(base, 3)}\n", "")
    code, out, err = run(capsys, "checkpoints", "list", str(base), "--json")
    assert (code, err) == (0, "")
    assert [e["status"] for e in json.loads(out)] == ["complete"] * 3

    code, out, err = run(capsys, "checkpoints", "inspect", str(chk(base, 3)))
    assert (code, err) == (0, "")
    assert f"  - {STATS_MASTER_STATE} (version 1, {len(data)} bytes):" in out.splitlines()
    code, out, err = run(capsys, "checkpoints", "inspect", str(chk(base, 3)), "--json")
    assert (code, err) == (0, "")
    [master] = json.loads(out)["master_states"]
    shown_as_bytes = name in ("nested-5000-deep", "not-utf8", "a-5000-digit-number")
    assert master.get("hex") == (data[:64].hex() if shown_as_bytes else None)
    assert (master["value"] is None) == (shown_as_bytes or name == "null")

    # the inline bytes are no keyed-state snapshot: dump refuses them in one line
    code, out, err = run(capsys, "savepoint", "dump", str(chk(base, 3)), "-o", str(tmp_path / "d"))
    assert (code, out) == (EXIT_ERROR, "")
    one_line(err, "sparkpoint: error: ")


def test_a_checkpoint_claiming_another_id_is_passed_over(
    capsys: pytest.CaptureFixture[str], base: Path
) -> None:
    """chk-3 holding a checkpoint 99 would be "latest" by its word; its directory says 3."""
    metadata = chk(base, 3) / "_metadata"
    metadata.write_bytes(encode_frame(2, payload(checkpoint_id=99)))
    assert_the_others_answer(capsys, base, "corrupt", "holds checkpoint 99, not 3")


def _mutations(whole: bytes, count: int, seed: int) -> Iterator[tuple[str, bytes]]:
    """Checksum-valid variants of a real payload: bytes flipped, set to 0xFF, cut short."""
    rng = random.Random(seed)
    body = whole[HEADER_SIZE:-TRAILER_SIZE]
    for i in range(count):
        data = bytearray(body)
        how = i % 3
        if how == 0:
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif how == 1:
            at = rng.randrange(len(data) - 4)
            data[at : at + 4] = b"\xff\xff\xff\xff"
        else:
            del data[rng.randrange(len(data)) :]
        yield f"{i}-{('flip', 'ff', 'cut')[how]}", encode_frame(2, bytes(data))


def test_random_mutations_never_hang_crash_or_print_more_than_a_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, base: Path
) -> None:
    """60 checksum-valid mutations of a real chk-3 payload: each is read, or refused with
    one line (exit 2 for inspect and dump; exit 0 and one skip report for the others).
    About half only change inline state bytes, which the payload does not check."""
    metadata = chk(base, 3) / "_metadata"
    whole = metadata.read_bytes()
    outcomes = {"read": 0, "refused": 0}
    for name, data in _mutations(whole, 60, seed=29):
        metadata.write_bytes(data)
        code, out, err = run(capsys, "checkpoints", "inspect", str(chk(base, 3)))
        assert code in (0, EXIT_ERROR), (name, err)
        if code == 0:
            outcomes["read"] += 1
            assert err == "", name
        else:
            outcomes["refused"] += 1
            one_line(err, "sparkpoint: error: ")
        dump = tmp_path / "dump"
        code, out, err = run(capsys, "savepoint", "dump", str(chk(base, 3)), "-o", str(dump))
        assert code in (0, EXIT_ERROR), (name, err)
        if code == EXIT_ERROR:
            one_line(err, "sparkpoint: error: ")
        for action in ("list", "history"):
            code, out, err = run(capsys, "checkpoints", action, str(base))
            assert code == 0, (name, action)
            assert err == "" or err.count("\n") == 1, (name, err)
        code, out, err = run(capsys, "checkpoints", "latest", str(base))
        assert code == 0 and out in (f"{chk(base, 2)}\n", f"{chk(base, 3)}\n"), (name, err)
    # the mutations reach past the frame: some are refused, some still parse
    assert outcomes["refused"] >= 20 and outcomes["read"] >= 4, outcomes
    assert sum(outcomes.values()) == 60


def test_random_mutations_of_a_savepoint_never_crash_the_dump(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """150 checksum-valid mutations of a savepoint with real keyed state: offsets, ranges
    and sizes now point anywhere in its state files; ``dump`` writes the tables or refuses
    with one line naming the file, key group and offset, never an internal error."""
    savepoint = write_savepoint(tmp_path, tmp_path / "savepoints")
    whole = (savepoint / "_metadata").read_bytes()
    outcomes = {"dumped": 0, "refused": 0}
    for name, data in _mutations(whole, 150, seed=7):
        (savepoint / "_metadata").write_bytes(data)
        argv = ("savepoint", "dump", str(savepoint), "-o", str(tmp_path / "dump"))
        code, out, err = run(capsys, *argv)
        assert code in (0, EXIT_ERROR), (name, err)
        if code == 0:
            outcomes["dumped"] += 1
            assert err == "" and out.endswith(
                " rows -> " + str(tmp_path / "dump" / "count-op.parquet") + "\n"
            ), name
        else:
            outcomes["refused"] += 1
            one_line(err, "sparkpoint: error: ")
    assert outcomes["refused"] >= 100 and outcomes["dumped"] >= 5, outcomes
    assert sum(outcomes.values()) == 150


# ---- what the snapshot says is escaped ----------------------------------------------------------

EVIL_OP = "op\x1b[31mRED\x1b[0m\u202eevil\nforged line\x07"
SHOWN_OP = "op\\x1b[31mRED\\x1b[0m\\u202eevil\\x0aforged line\\x07"
EVIL_MASTER = "master\x1b]0;title\x07\u2066"
SHOWN_MASTER = "master\\x1b]0;title\\x07\\u2066"
EVIL_DIR = "ck\x1b[2J\u202ets"
SHOWN_DIR = "ck\\x1b[2J\\u202ets"


def write_evil_checkpoint(access: FsCheckpointStorageAccess, n: int) -> Path:
    location = access.initialize_location_for_checkpoint(n)
    subs = {0: OperatorSubtaskState((keyed_handle(location, b"s" * 10, KeyGroupRange(0, 1)),))}
    metadata = CheckpointMetadata(
        n,
        (OperatorState(EVIL_OP, 1, 2, subs),),
        (MasterState.from_json(EVIL_MASTER, {"key\x1b[1m": "value\u202e"}),),
        CheckpointProperties.for_checkpoint("RETAIN_ON_CANCELLATION"),
    )
    return Path(write_metadata(location, metadata).external_pointer)


def test_everything_printed_from_a_snapshot_is_escaped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = tmp_path / EVIL_DIR
    access = storage_access(root)
    write_evil_checkpoint(access, 1)
    second = write_evil_checkpoint(access, 2)
    (chk(root, 3)).mkdir()
    (chk(root, 3) / "_metadata").write_bytes(b"SPKM\x1b[2J")  # truncated: reported, escaped
    evil_op, evil_dir = SHOWN_OP, f"{tmp_path}/{SHOWN_DIR}/{JOB}/chk-2"
    assert str(second) == f"{tmp_path}/{EVIL_DIR}/{JOB}/chk-2"

    code, out, err = run(capsys, "checkpoints", "list", str(root))
    assert code == 0
    assert evil_dir in out
    one_line(err, f"sparkpoint: skipped {tmp_path}/{SHOWN_DIR}/{JOB}/chk-3 (corrupt)", "truncated")

    code, out, err = run(capsys, "checkpoints", "latest", str(root))
    assert (code, out) == (0, f"{evil_dir}\n")

    code, out, _ = run(capsys, "checkpoints", "history", str(root))
    assert code == 0 and f"{evil_op}: 10 B" in out

    code, out, err = run(capsys, "checkpoints", "inspect", str(second))
    assert (code, err) == (0, "")
    assert f"  - {evil_op}: parallelism 1, max parallelism 2, 10 bytes" in out
    assert f"  - {SHOWN_MASTER} (version 1, " in out
    assert '"key\\u001b[1m": "value\\u202e"' in out  # ASCII JSON
    assert f"  pointer:    {evil_dir}" in out

    # JSON output keeps the values, escaped by JSON itself
    code, out, _ = run(capsys, "checkpoints", "inspect", str(second), "--json")
    assert code == 0 and json.loads(out)["operators"][0]["operator_id"] == EVIL_OP

    # an error line naming the snapshot's path is escaped as well
    code, out, err = run(capsys, "checkpoints", "inspect", str(second / "nope\x1b[2J"))
    assert (code, out) == (EXIT_ERROR, "")
    one_line(err, "sparkpoint: error: Cannot find checkpoint", "nope\\x1b[2J")


def test_dump_escapes_the_operator_it_names(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    savepoint = write_savepoint(tmp_path, tmp_path / "savepoints")
    metadata = Snapshot.load(str(savepoint)).metadata
    renamed = CheckpointMetadata(
        metadata.checkpoint_id,
        tuple(
            OperatorState(EVIL_OP, op.parallelism, op.max_parallelism, op.subtask_states)
            if op.operator_id == "count-op"
            else op
            for op in metadata.operator_states
        ),
        metadata.master_states,
        metadata.properties,
    )
    (savepoint / "_metadata").write_bytes(store_checkpoint_metadata(renamed))
    out_dir = tmp_path / "dump"
    code, out, err = run(capsys, "savepoint", "dump", str(savepoint), "-o", str(out_dir))
    assert (code, err) == (0, "")
    [written] = os.listdir(out_dir)
    assert written == "op__31mRED__0m_evil_forged_line_.parquet"
    assert out == f"{SHOWN_OP}: 100 rows -> {out_dir / written}\n"


def test_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str], base: Path) -> None:
    metadata = chk(base, 3) / "_metadata"
    metadata.unlink()
    os.mkfifo(metadata)
    assert stat.S_ISFIFO(os.lstat(metadata).st_mode)
    code, _, err = run(capsys, "--debug", "checkpoints", "inspect", str(metadata))
    assert code == EXIT_ERROR
    assert err.startswith("Traceback (most recent call last):")
    assert err.splitlines()[-1].startswith("sparkpoint: error: Refusing to read")
