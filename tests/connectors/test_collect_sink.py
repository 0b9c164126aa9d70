"""The collect sink keeps any picklable record across checkpoints: uncommitted output sits
in the checkpoint's ``_metadata`` JSON, which once failed on ``bytes`` records."""

from __future__ import annotations

import math
from typing import Any

import pytest

from sparkpoint.checkpoint.metadata import CheckpointMetadata
from sparkpoint.common import RestartStrategies, Row
from sparkpoint.connectors.sink import CollectSink
from sparkpoint.datastream import FileSystemCheckpointStorage
from sparkpoint.runtime.driver.master_state import JobMasterState
from sparkpoint.runtime.driver.sink_commits import SinkCommits

RECORDS: list[Any] = [b"\x00\xffraw", ("t", 1), ["l", 2], Row(a=1, b=b"x"), float("nan"), None]


def test_uncommitted_collect_output_survives_the_metadata_json() -> None:
    writer = CollectSink().create_writer("job", 1, 0, 1, 0)
    writer.write(RECORDS)
    staged = writer.prepare_commit()
    state = JobMasterState("job", "name", 1, pending_sink_commits=(("sink-9", staged),))
    metadata = CheckpointMetadata(1, master_states=(state.to_master_state(),))
    restored = JobMasterState.from_metadata(metadata)
    assert restored is not None
    sink = CollectSink()
    SinkCommits({"sink-9": sink}).recommit(restored.pending_sink_commits)
    got = sink.collected
    assert got[:4] == RECORDS[:4] and type(got[1]) is tuple and type(got[2]) is list
    assert math.isnan(got[4]) and got[5] is None


@pytest.mark.spark
def test_checkpointed_job_collects_bytes_records(env: Any, tmp_path: Any) -> None:
    env.enable_checkpointing(10)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage((tmp_path / "ckpt").as_uri())
    )
    env.set_restart_strategy(RestartStrategies.no_restart())
    env.configure({"sparkpoint.epoch.max-records-per-split": "50"})
    env.set_parallelism(2)
    data = [bytes([i % 256]) * (1 + i % 5) for i in range(400)]
    sink = CollectSink()
    env.from_collection(data).map(lambda b: (b, len(b))).sink_to(sink)
    result = env.execute("collect-bytes")
    completed = [c for c in result.checkpoints if c.status == "COMPLETED"]
    assert len(completed) >= 2  # output staged across several checkpoints
    assert sorted(sink.collected) == sorted((b, len(b)) for b in data)
