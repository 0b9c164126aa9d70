"""``SavepointReader``: the keyed state of a savepoint or retained checkpoint as a DataFrame.

Flink's ``SavepointReader`` shape: ``SavepointReader.read(spark, path)``, then
``read_keyed_state(uid, ...)``. The DataFrame is computed by Spark tasks, each reading the
key groups of one split straight from storage; the driver only reads ``_metadata`` and the
snapshot headers (for incremental RocksDB checkpoints, one small Spark job reads the state
registry of the subtasks that hold each state).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

from sparkpoint.checkpoint.handles import (
    ChangelogStateBackendHandle,
    IncrementalRemoteKeyedStateHandle,
    KeyGroupsStateHandle,
)
from sparkpoint.checkpoint.trust import SnapshotTrust
from sparkpoint.errors import RestoreError
from sparkpoint.state import typeinfo as ti
from sparkpoint.state.table import RegisteredStateMeta
from sparkpoint.state_processor.snapshot_reading import (
    OperatorInfo,
    Snapshot,
    key_groups_metas,
    keyed_handles,
    merge_metas,
    plan_splits,
    read_split,
    rebuilt_snapshot,
    registry_metas,
)
from sparkpoint.state_processor.spark_support import (
    ExecutorSetup,
    payload_frame,
    payloads,
    spark_schema,
)
from sparkpoint.state_processor.state_columns import KeyColumn, StateColumn, StateDecoder
from sparkpoint.state_processor.state_info import StateInfo

__all__ = ["SavepointReader"]


class SavepointReader:
    """Reads the operators and keyed state of one savepoint or retained checkpoint."""

    def __init__(self, spark: Any, snapshot: Snapshot) -> None:
        self.spark = spark
        self.snapshot = snapshot
        self._metas: dict[str, dict[str, RegisteredStateMeta]] = {}

    @staticmethod
    def read(
        spark: Any, path: str, *, configuration: Mapping[str, Any] | None = None
    ) -> SavepointReader:
        """Open the savepoint or checkpoint at ``path`` (its directory or ``_metadata``).

        ``configuration``'s ``sparkpoint.snapshot.*`` keys decide what is trusted: with a
        signing key an unsigned or mismatched snapshot is refused here, and with
        ``allow-pickle`` false pickled state is read as plain data only (docs/storage.md).
        Without it, the process's settings apply (``trust.use_by_default``)."""
        trust = None if configuration is None else SnapshotTrust.from_config(configuration)
        return SavepointReader(spark, Snapshot.load(path, trust))

    @property
    def path(self) -> str:
        """The snapshot's directory."""
        return self.snapshot.pointer

    @property
    def checkpoint_id(self) -> int:
        """The checkpoint id recorded in ``_metadata``."""
        return self.snapshot.metadata.checkpoint_id

    def operators(self) -> list[OperatorInfo]:
        """Every operator of the snapshot: uid, parallelism, max parallelism, state format
        and size."""
        return self.snapshot.operators()

    def state_infos(self, uid: str) -> list[StateInfo]:
        """The keyed states of operator ``uid`` as recorded (names, kinds, types, TTL)."""
        return [StateInfo.from_meta(m) for m in self._state_metas(uid).values()]

    def read_keyed_state(
        self,
        uid: str,
        *,
        states: Sequence[str] | None = None,
        key_type: ti.TypeInformation | None = None,
        types: Mapping[str, ti.TypeInformation] | None = None,
        form: str = "wide",
        key_column: str = "key",
        splits: int | None = None,
    ) -> Any:
        """The keyed state of operator ``uid`` as a DataFrame.

        ``form="wide"``: one row per key, a column per state (the value; a list for LIST
        state; a map for MAP state; null where the key has no value). ``form="long"``: one
        row per key and state (per map entry for MAP state) with ``state_name``,
        ``user_key`` (MAP only) and ``value``; the selected states must share a value type.

        Keys and untyped (pickled) values come as ``binary`` pickle bytes, marked so that the
        writer stores them unchanged; ``key_type`` and ``types`` (state name -> the type of its
        column: ``Types.LIST(...)`` for LIST, ``Types.MAP(...)`` for MAP) decode them into
        typed columns instead. ``splits`` is the number of Spark tasks aimed at (default:
        twice the default parallelism).
        """
        metas = self._state_metas(uid)
        if not metas:
            raise KeyError(f"Operator {uid!r} holds no keyed state in {self.path}")
        chosen = list(metas) if states is None else list(states)
        unknown = [s for s in chosen if s not in metas]
        if unknown or not chosen:
            raise KeyError(
                f"Operator {uid!r} has no state {unknown or chosen!r} in "
                f"{self.path} (states: {', '.join(map(repr, metas)) or 'none'})"
            )
        hints = dict(types or {})
        extra = [n for n in hints if n not in chosen]
        if extra:
            raise KeyError(f"Type hints for states that are not read: {extra}")
        key_cfg = metas[chosen[0]].key_serializer.snapshot_config()
        decoder = StateDecoder(
            KeyColumn.of(key_cfg, key_type),
            [StateColumn.of(metas[n], hints.get(n)) for n in chosen],
            form,
            key_column,
        )
        handles = keyed_handles(self.snapshot.operator(uid))
        target = splits or 2 * self.spark.sparkContext.defaultParallelism
        setup = ExecutorSetup(self.snapshot.pickle_allowed)

        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            setup.apply()
            for split in payloads(batches):
                yield from decoder.batches(read_split(split))

        max_parallelism = self.snapshot.operator(uid).max_parallelism
        frame = payload_frame(self.spark, plan_splits(handles, target, max_parallelism))
        return frame.mapInArrow(run, spark_schema(decoder.schema))

    # -- state meta infos ---------------------------------------------------------------

    def _state_metas(self, uid: str) -> dict[str, RegisteredStateMeta]:
        cached = self._metas.get(uid)
        if cached is not None:
            return cached
        handles = keyed_handles(self.snapshot.operator(uid))
        full = [h for h in handles if isinstance(h, KeyGroupsStateHandle)]
        incremental = [h for h in handles if isinstance(h, IncrementalRemoteKeyedStateHandle)]
        changelog = [h for h in handles if isinstance(h, ChangelogStateBackendHandle)]
        other = [
            h
            for h in handles
            if not isinstance(
                h,
                KeyGroupsStateHandle
                | IncrementalRemoteKeyedStateHandle
                | ChangelogStateBackendHandle,
            )
        ]
        if other:
            raise RestoreError(
                f"Operator {uid!r} holds keyed state handles of type "
                f"{type(other[0]).__name__}, which cannot be read"
            )
        found = (
            key_groups_metas(full)
            + self._incremental_metas(incremental)
            + self._changelog_metas(changelog, self.snapshot.operator(uid).max_parallelism)
        )
        metas = merge_metas(found, f"operator {uid!r}")
        self._metas[uid] = metas
        return metas

    def _changelog_metas(
        self, handles: Sequence[ChangelogStateBackendHandle], max_parallelism: int
    ) -> list[RegisteredStateMeta]:
        """Meta infos of changelog handles, whose entries may register states: a Spark job
        rebuilds each handle's state and reads the header of the snapshot it makes."""
        if not handles:
            return []
        setup = ExecutorSetup(self.snapshot.pickle_allowed)

        def describe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            setup.apply()
            for handle in payloads(batches):
                rebuilt = rebuilt_snapshot(handle, max_parallelism)
                metas = key_groups_metas([rebuilt]) if rebuilt is not None else []
                yield pa.record_batch(
                    [pa.array([json.dumps([m.to_json() for m in metas])])], names=["metas"]
                )

        rows = (
            payload_frame(self.spark, list(handles)).mapInArrow(describe, "metas string").collect()
        )
        return [RegisteredStateMeta.from_json(m) for r in rows for m in json.loads(r[0])]

    def _incremental_metas(
        self, handles: Sequence[IncrementalRemoteKeyedStateHandle]
    ) -> list[RegisteredStateMeta]:
        """Meta infos from the RocksDB state registries, read by a Spark job over the fewest
        handles that hold every state name (their meta streams list the names)."""
        if not handles:
            return []
        from sparkpoint.state.rocksdb.incremental import read_incremental_meta

        names_of = [(h, set(read_incremental_meta(h).states)) for h in handles]
        missing = set().union(*(names for _, names in names_of))
        chosen = []
        for h, names in sorted(names_of, key=lambda item: -len(item[1])):
            if names & missing:
                chosen.append(h)
                missing -= names
        setup = ExecutorSetup(self.snapshot.pickle_allowed)

        def describe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            setup.apply()
            for handle in payloads(batches):
                yield pa.record_batch(
                    [pa.array([json.dumps(registry_metas(handle))])], names=["metas"]
                )

        rows = payload_frame(self.spark, chosen).mapInArrow(describe, "metas string").collect()
        return [RegisteredStateMeta.from_json(m) for r in rows for m in json.loads(r[0])]
