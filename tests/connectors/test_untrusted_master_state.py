"""The master state inside ``_metadata`` is input from outside (issue 29, item 1): a crafted
snapshot whose file-sink commits or file-source splits name files outside the job's own
directories is refused, naming the ``_metadata``, the field and the value, in every claim
mode, before any I/O: an audit hook on the driver (where restores and commits run) and the
file system itself show that no file outside the job's directories was opened, moved,
created or deleted. The snapshot is real (a job's retained checkpoint); only its master
state is rewritten, with the real serializer."""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.checkpoint.discovery import load_pointer
from sparkpoint.checkpoint.metadata import CheckpointMetadata, MasterState
from sparkpoint.checkpoint.metadata.file_format import store_checkpoint_metadata
from sparkpoint.common import Configuration, Encoder
from sparkpoint.connectors.source import SplitEnumerator
from sparkpoint.datastream import (
    ExternalizedCheckpointRetention,
    FileSystemCheckpointStorage,
    StreamExecutionEnvironment,
)
from sparkpoint.datastream.connectors.file_system import FileSink, FileSource, StreamFormat
from sparkpoint.errors import UnsafeStatePathError
from tests.runtime.jobs.reference import run_until_checkpoints

LINES = [f"line {i:04d} " + "x" * (i % 29) for i in range(400)]
CLAIM_MODES = ["CLAIM", "NO_CLAIM", "LEGACY"]
_AUDITED = ("open", "os.rename", "os.replace", "os.remove", "os.rmdir", "os.mkdir", "os.symlink")
_EVENTS: list[tuple[str, str]] = []
_RECORDING = threading.Event()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _RECORDING.is_set() and event in _AUDITED:
        for arg in args[:2]:
            if isinstance(arg, (str, bytes, os.PathLike)):
                _EVENTS.append((event, os.fsdecode(arg)))


sys.addaudithook(_audit)  # hooks cannot be removed: it records only while a test asks


def _env(spark: Any, tmp_path: Path, name: str, **conf: str) -> Any:
    config = Configuration()
    config.set_string("sparkpoint.epoch.max-records-per-split", "4")
    config.set_string("sparkpoint.local-state.dir", str(tmp_path / "local"))
    for key, value in conf.items():
        config.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(config, spark=spark)
    env.set_parallelism(1)
    env.enable_checkpointing(10)
    checkpoints = env.get_checkpoint_config()
    checkpoints.set_checkpoint_storage(FileSystemCheckpointStorage(str(tmp_path / name)))
    checkpoints.set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    )
    return env


def _job(env: Any, tmp_path: Path, monitored: bool) -> None:
    builder = FileSource.for_record_stream_format(
        StreamFormat.text_line_format(), str(tmp_path / "in")
    )
    if monitored:
        builder = builder.monitor_continuously(1)
    (
        env.from_source(builder.build(), None, "lines")
        .uid("lines")
        .map(lambda s: s.upper())
        .uid("upper")
        .sink_to(
            FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder()).build()
        )
        .uid("parts")
    )


def _committed(out: Path) -> list[str]:
    lines: list[str] = []
    for name in sorted(os.listdir(out)):
        if not name.startswith("."):
            lines.extend((out / name).read_text().splitlines())
    return lines


@pytest.fixture
def snapshot(spark: Any, tmp_path: Path) -> tuple[str, CheckpointMetadata, dict[str, Any]]:
    """A retained checkpoint of a file-to-file job whose master state has sink commits
    still pending: its pointer, its metadata and its master state as JSON."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "data.txt").write_text("\n".join(LINES) + "\n")
    env = _env(spark, tmp_path, "ckpt-a")
    _job(env, tmp_path, monitored=True)
    done = run_until_checkpoints(env, 1, "untrusted-master-a")
    for stats in reversed(done):
        if not os.path.exists(stats.external_pointer):
            continue
        metadata, _ = load_pointer(stats.external_pointer)
        master = _master(metadata)
        if any(commits for _op, commits in master["pending_sink_commits"]):
            return stats.external_pointer, metadata, master
    raise AssertionError("no retained checkpoint has pending sink commits")


def _master(metadata: CheckpointMetadata) -> dict[str, Any]:
    found = metadata.get_master_state("sparkpoint.job")
    assert found is not None
    data = found.to_json()
    assert isinstance(data, dict)
    return data


def _rewrite(pointer: str, metadata: CheckpointMetadata, master: dict[str, Any]) -> Path:
    states = tuple(
        MasterState.from_json(m.name, master) if m.name == "sparkpoint.job" else m
        for m in metadata.master_states
    )
    path = Path(pointer) / "_metadata"
    path.write_bytes(store_checkpoint_metadata(dataclasses.replace(metadata, master_states=states)))
    return path


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p): p.read_bytes() if p.is_file() else b"<dir>"
        for p in sorted(root.rglob("*"))
        if not p.is_symlink()
    }


def test_the_untouched_snapshot_restores_exactly(
    spark: Any, tmp_path: Path, snapshot: tuple[str, CheckpointMetadata, dict[str, Any]]
) -> None:
    """The checks refuse nothing the job wrote itself: the pending commits are redone and
    every line lands in the output exactly once."""
    pointer, _metadata, _master_state = snapshot
    env = _env(
        spark,
        tmp_path,
        "ckpt-a",  # the job's own checkpoint directory: its snapshots are its own
        **{
            "execution.state-recovery.path": pointer,
            "sparkpoint.epoch.max-records-per-split": "1000",
        },
    )
    _job(env, tmp_path, monitored=False)
    env.execute("untrusted-master-b")
    out = _committed(tmp_path / "out")
    assert sorted(out) == sorted(s.upper() for s in LINES)
    assert len(out) == len(LINES) == 400


def _crafted(tmp_path: Path, pointer: str, master: dict[str, Any], case: str) -> tuple[str, str]:
    """Alter ``master`` for ``case``; returns the field and the value the error names."""
    outside, home = tmp_path / "outside", tmp_path / "home"
    sink_op, commits = next((op, c) for op, c in master["pending_sink_commits"] if c)
    staged, final = commits[0]
    source_op = next(iter(master["sources"]))
    if case == "plant authorized_keys":  # a file shipped inside the snapshot
        payload = str(Path(pointer) / "payload")
        Path(payload).write_text("ssh-ed25519 AAAA attacker\n")
        target = str(home / ".ssh" / "authorized_keys")
        master["pending_sink_commits"] = [[sink_op, [[payload, target]]]]
        return f"pending_sink_commits[{sink_op!r}]", payload
    if case == "final outside":
        target = str(home / ".ssh" / "authorized_keys")
        master["pending_sink_commits"] = [[sink_op, [[staged, target]]]]
        return "final path", target
    if case == "move a file in":
        victim = str(outside / "victim.txt")
        master["pending_sink_commits"] = [[sink_op, [[victim, final]]]]
        return "staged path", victim
    if case == "dot-dot":
        escape = staged.rsplit("/", 1)[0] + "/../../../outside/victim.txt"
        master["pending_sink_commits"] = [[sink_op, [[escape, final]]]]
        return "has a '..' segment", escape
    if case == "read a secret":
        secret = str(outside / "secret.txt")
        split = dict(master["sources"][source_op][0], split_id=secret)
        master["sources"][source_op] = [split]
        return f"sources[{source_op!r}]", secret
    assert case == "read a hidden file"
    hidden = str(tmp_path / "in" / ".credentials")
    master["sources"][source_op] = [dict(master["sources"][source_op][0], split_id=hidden)]
    return "split id", hidden


@pytest.mark.parametrize("claim_mode", CLAIM_MODES)
def test_crafted_master_state_is_refused_before_any_io(
    spark: Any,
    tmp_path: Path,
    snapshot: tuple[str, CheckpointMetadata, dict[str, Any]],
    claim_mode: str,
) -> None:
    pointer, metadata, master = snapshot
    outside, home = tmp_path / "outside", tmp_path / "home"
    outside.mkdir()
    (outside / "victim.txt").write_text("moved by nobody\n")
    (outside / "secret.txt").write_text("the secret\n")
    (tmp_path / "in" / ".credentials").write_text("hidden\n")
    home.mkdir()
    cases = [
        "plant authorized_keys",
        "final outside",
        "move a file in",
        "dot-dot",
        "read a secret",
        "read a hidden file",
    ]
    refused = 0
    for case in cases:
        crafted = {k: v for k, v in master.items()}
        crafted["sources"] = {k: list(v) for k, v in master["sources"].items()}
        field, value = _crafted(tmp_path, pointer, crafted, case)
        metadata_file = _rewrite(pointer, metadata, crafted)
        snapshot_before = _tree(Path(pointer).parent)
        outside_before, out_before = _tree(outside), _tree(tmp_path / "out")
        env = _env(
            spark,
            tmp_path,
            f"ckpt-{claim_mode}",
            **{
                "execution.state-recovery.path": pointer,
                "execution.state-recovery.claim-mode": claim_mode,
            },
        )
        _job(env, tmp_path, monitored=False)
        _EVENTS.clear()
        _RECORDING.set()
        try:
            with pytest.raises(UnsafeStatePathError) as info:
                env.execute(f"crafted-{case}")
        finally:
            _RECORDING.clear()
        message = str(info.value)
        assert f"checkpoint metadata file {metadata_file}" in message, (case, message)
        assert field in message and repr(value) in message, (case, message)
        refused += 1
        touched = [
            (event, path)
            for event, path in _EVENTS
            if path.startswith((str(outside), str(home), str(tmp_path / "in" / ".credentials")))
            or (event != "open" and path.startswith(str(tmp_path / "out")))
        ]
        assert touched == [], (case, touched)
        assert _tree(outside) == outside_before
        assert _tree(home) == {}
        assert _tree(tmp_path / "out") == out_before
        assert _tree(Path(pointer).parent) == snapshot_before  # CLAIM deletes nothing either
    assert refused == len(cases) == 6


# ---- the connectors' checks on their own (no Spark) --------------------------------------


@pytest.mark.parametrize(
    ("committable", "reason"),
    [
        (["{base}/.inprogress/job1/part-a.0.u", "{base}/part-a"], None),
        (["{base}/.inprogress/job2/part-a.0.u", "{base}/part-a"], "is not a file of"),
        (["{base}/.inprogress/job1/sub/part-a.0.u", "{base}/part-a"], "is not a file of"),
        (["{base}/.inprogress/job1", "{base}/part-a"], "is not a file of"),
        (["{base}/part-b", "{base}/part-a"], "lies outside"),
        (["{base}/.inprogress/job1/part-a.0.u", "{base}/sub/part-a"], "is not a part file"),
        (["{base}/.inprogress/job1/part-a.0.u", "{base}/.hidden"], "is not a part file"),
        (["{base}/.inprogress/job1/part-a.0.u", "{base}/other-a"], "is not a part file"),
        (["{base}/.inprogress/job1/part-a.0.u", "{base}"], "lies outside"),
        (["{base}/.inprogress/job1/part-a.0.u", "{base}/../x/part-a"], "has a '..' segment"),
        (["{base}/.inprogress/job1/part-a.0.u", "{link}/part-a"], "symbolic link"),
        (["{base}/.inprogress/job1/part-a.0.u", "{base}/part-a\x00"], "NUL character"),
        (["{base}/.inprogress/job1/part-a.0.u"], "is not a [staged, final] pair"),
        ("{base}/part-a", "is not a [staged, final] pair"),
        ([7, "{base}/part-a"], "is a int, not a path"),
    ],
)
def test_file_sink_committables(tmp_path: Path, committable: Any, reason: str | None) -> None:
    base, outside = tmp_path / "out", tmp_path / "elsewhere"
    base.mkdir()
    outside.mkdir()
    (base / "part-link").symlink_to(outside)

    def fill(v: Any) -> Any:
        return v.format(base=base, link=base / "part-link") if isinstance(v, str) else v

    filled = [fill(v) for v in committable] if isinstance(committable, list) else fill(committable)
    sink = FileSink.for_row_format(str(base), Encoder.simple_string_encoder()).build()
    if reason is None:
        sink.check_restored([filled], "job1", "where")
        return
    with pytest.raises(UnsafeStatePathError) as info:
        sink.check_restored([filled], "job1", "checkpoint metadata file /c/_metadata")
    assert reason in str(info.value)
    assert "in checkpoint metadata file /c/_metadata" in str(info.value)


def test_file_source_splits(tmp_path: Path) -> None:
    data, other = tmp_path / "in", tmp_path / "other"
    (data / "nested").mkdir(parents=True)
    other.mkdir()
    (data / "escape").symlink_to(other)
    single = tmp_path / "one.txt"
    single.write_text("x\n")
    source = FileSource.for_record_stream_format(
        StreamFormat.text_line_format(), str(data), str(single)
    ).build()
    enum_state = [{"split_id": p, "position": 0} for p in (f"{data}/a", f"{data}/nested/b")]
    enum_state.append({"split_id": str(single), "position": 0})
    enumerator = SplitEnumerator(source, 1)
    assert len(enumerator.check_restored(enum_state, "where")) == 3
    refused = {
        f"{other}/a": "lies outside",
        f"{data}/../other/a": "has a '..' segment",
        f"{data}/escape/a": "symbolic link",
        f"{data}/_SUCCESS": "hidden file",
        f"{data}/nested/.b": "hidden file",
        f"{single}.bak": "lies outside",
    }
    for split_id, reason in refused.items():
        with pytest.raises(UnsafeStatePathError) as info:
            enumerator.check_restored([{"split_id": split_id, "position": 0}], "the snapshot")
        assert reason in str(info.value) and repr(split_id) in str(info.value), split_id
    with pytest.raises(UnsafeStatePathError, match="not a list of splits"):
        enumerator.check_restored({"split_id": "x"}, "the snapshot")
