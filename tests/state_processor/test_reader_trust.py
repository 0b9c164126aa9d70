"""``SavepointReader.read(spark, path, configuration=...)`` applies the snapshot trust keys:
with a signing key an unsigned snapshot is refused in ``read`` and a signed one reads
exactly; with allow-pickle false the Spark tasks read plain data exactly and refuse a
crafted pickle before it runs (its marker file never appears).

Real heap checkpoints written through real file-system storage, read on the shared session.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.checkpoint.fs_storage import FsCheckpointStorageAccess
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.metadata import CheckpointMetadata, OperatorState, OperatorSubtaskState
from sparkpoint.checkpoint.metadata.file_format import write_metadata
from sparkpoint.checkpoint.properties import CheckpointProperties
from sparkpoint.clock import SYSTEM_CLOCK
from sparkpoint.common.typeinfo import Types
from sparkpoint.datastream import FileSystemCheckpointStorage
from sparkpoint.errors import SnapshotSignatureError
from sparkpoint.state.backend import KeyedStateBackendParameters, SnapshotType
from sparkpoint.state.descriptors import ValueStateDescriptor
from sparkpoint.state.heap import HeapKeyedStateBackend, clear_heap_cache
from sparkpoint.state_processor import SavepointReader
from tests.fixtures.crafted_pickle import Plant

JOB = "fedcba9876543210fedcba9876543210"
MAX_P = 8
KEY = "reader key"


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    clear_heap_cache()
    yield
    clear_heap_cache()


def _checkpoint(base: Path, n: int, values: dict[int, Any], signing_key: bytes | None) -> Path:
    """chk-N: one heap subtask with a typed count and an untyped value per key (one file)."""
    storage = FileSystemCheckpointStorage(str(base), file_state_size_threshold=0)
    access = storage.create_checkpoint_storage(JOB)
    assert isinstance(access, FsCheckpointStorageAccess)
    access.initialize_base_locations_for_checkpoint()
    location = access.initialize_location_for_checkpoint(n)
    backend = HeapKeyedStateBackend(
        KeyedStateBackendParameters(
            "job",
            "op",
            0,
            1,
            MAX_P,
            KeyGroupRange(0, MAX_P - 1),
            str(base / f"l{n}"),
            SYSTEM_CLOCK,
            None,
        )
    )
    count = backend.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    other = backend.get_partitioned_state(ValueStateDescriptor("u", Types.PICKLED_BYTE_ARRAY()))
    for key, value in values.items():
        backend.set_current_key(key)
        count.update(key * 10)
        other.update(value)
    handle = backend.snapshot(n, location, SnapshotType.CHECKPOINT)()
    backend.dispose()
    metadata = CheckpointMetadata(
        n,
        (OperatorState("op", 1, MAX_P, {0: OperatorSubtaskState((handle,))}),),
        (),
        CheckpointProperties.for_checkpoint("RETAIN_ON_CANCELLATION"),
    )
    return Path(write_metadata(location, metadata, signing_key=signing_key).external_pointer)


def test_reader_applies_the_signing_key_and_allow_pickle(spark: Any, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    base = tmp_path / "checkpoints"
    plain = {k: ("v", k) for k in range(25)}
    signed = _checkpoint(base, 1, plain, KEY.encode())
    unsigned = _checkpoint(base, 2, plain, None)
    crafted = _checkpoint(base, 3, {**plain, 7: Plant(marker)}, None)
    with_key = {"sparkpoint.snapshot.signing-key": KEY}
    no_pickle = {"sparkpoint.snapshot.allow-pickle": "false"}

    reader = SavepointReader.read(spark, str(signed), configuration=with_key)
    rows = reader.read_keyed_state("op", states=["count"], key_type=Types.LONG()).collect()
    assert sorted((r["key"], r["count"]) for r in rows) == [(k, k * 10) for k in range(25)]

    with pytest.raises(SnapshotSignatureError, match="Refusing unsigned checkpoint metadata"):
        SavepointReader.read(spark, str(unsigned), configuration=with_key)

    reader = SavepointReader.read(spark, str(unsigned), configuration=no_pickle)
    rows = reader.read_keyed_state("op", states=["count"], key_type=Types.LONG()).collect()
    assert sorted((r["key"], r["count"]) for r in rows) == [(k, k * 10) for k in range(25)]

    reader = SavepointReader.read(spark, str(crafted), configuration=no_pickle)
    with pytest.raises(Exception, match=r"Refusing to unpickle .*it names io\.open"):
        reader.read_keyed_state("op", states=["count"], key_type=Types.LONG()).collect()
    assert not marker.exists()
