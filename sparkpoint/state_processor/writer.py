"""``SavepointWriter``: a new savepoint from DataFrames, or an existing one transformed.

Flink's ``SavepointWriter`` shape: ``new_savepoint(spark, max_parallelism)`` or
``from_existing_savepoint(spark, path)``, then ``with_operator(uid, transformation)``,
``remove_operator(uid)``, ``change_operator_identifier(old, new)`` and ``write(path)``.
A transformation comes from ``OperatorTransformation.bootstrap_with(df).key_by(column)
.transform(*states)``: one row per key, a column per state.

``write`` runs one Spark job per new operator: the rows are encoded where they are, moved to
their subtask by key group, sorted, and each task writes one key-groups stream through the
checkpoint stream factory of the target directory. Operators kept from an existing snapshot
are copied into the new directory by Spark tasks, or referenced where they are. The driver
writes ``_metadata`` last: until then the directory is no savepoint, and a failed write
deletes it.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

from sparkpoint.checkpoint.handles import (
    ChangelogStateBackendHandle,
    FileStateHandle,
    HandleAndLocalPath,
    IncrementalRemoteKeyedStateHandle,
    KeyedStateHandle,
    KeyGroupsStateHandle,
    OperatorStateHandle,
    RelativeFileStateHandle,
    StreamStateHandle,
)
from sparkpoint.checkpoint.metadata import (
    CheckpointMetadata,
    MasterState,
    OperatorState,
    OperatorSubtaskState,
)
from sparkpoint.checkpoint.metadata.file_format import write_metadata
from sparkpoint.checkpoint.properties import CheckpointProperties
from sparkpoint.checkpoint.stats import STATS_MASTER_STATE
from sparkpoint.checkpoint.trust import SnapshotTrust, default_trust
from sparkpoint.config import CheckpointingOptions
from sparkpoint.errors import StorageError
from sparkpoint.fs import get_filesystem
from sparkpoint.state import typeinfo as ti
from sparkpoint.state.descriptors import StateDescriptor
from sparkpoint.state.key_groups import (
    KEY_GROUPS_SINCE_FORMAT,
    KeyGroupAssigner,
    check_parallelism_preconditions,
)
from sparkpoint.state.key_hash_rules import (
    KEY_HASH_MASTER_STATE,
    VALUE_RULE,
    key_hash_master_state,
    recorded_key_hash_rules,
    rule_of,
)
from sparkpoint.state_processor.snapshot_reading import Snapshot
from sparkpoint.state_processor.spark_support import (
    ExecutorSetup,
    is_pickled_field,
    payload_frame,
    payloads,
    spark_schema,
)
from sparkpoint.state_processor.state_info import StateInfo
from sparkpoint.state_processor.state_writing import (
    RowEncoder,
    SavepointTarget,
    StateInput,
    SubtaskWriter,
)
from sparkpoint.state_processor.type_mapping import (
    arrow_type,
    is_pickled,
    raw_pickle_config,
    state_column_type,
    type_info_from_config,
)

__all__ = [
    "KeyedOperatorTransformation",
    "OneInputOperatorTransformation",
    "OperatorTransformation",
    "SavepointWriter",
    "StateBootstrapTransformation",
]


class StateBootstrapTransformation:
    """The keyed state of one operator, to be written from a DataFrame (one row per key)."""

    def __init__(
        self,
        df: Any,
        key_column: str,
        key_type: ti.TypeInformation | None,
        states: Sequence[StateInfo],
        columns: Mapping[str, str],
        types: Mapping[str, ti.TypeInformation],
        parallelism: int | None,
    ) -> None:
        self.df = df
        self.key_column = key_column
        self.key_type = key_type
        self.states = list(states)
        self.columns = dict(columns)
        self.types = dict(types)
        self.parallelism = parallelism


class KeyedOperatorTransformation:
    """A DataFrame keyed by a column; ``transform`` names the states its columns hold."""

    def __init__(self, df: Any, key_column: str, key_type: ti.TypeInformation | None) -> None:
        self._df = df
        self._key_column = key_column
        self._key_type = key_type

    def transform(
        self,
        *states: StateDescriptor | StateInfo,
        columns: Mapping[str, str] | None = None,
        types: Mapping[str, ti.TypeInformation] | None = None,
        parallelism: int | None = None,
    ) -> StateBootstrapTransformation:
        """Write ``states`` (descriptors as the job registers them, or ``StateInfo`` from a
        reader) from the columns of the same names (``columns``: state name -> column).

        A VALUE/REDUCING/AGGREGATING column holds the value, a LIST column an array, a MAP
        column a map; null (or an empty array or map) means the key has no such state.
        ``types`` (state name -> type of its column) says which Python objects a column of an
        untyped (pickled) state stands for: without it, structs become tuples. ``parallelism``
        is the number of subtask streams (default: the Spark default parallelism, at most
        the max parallelism).
        """
        if not states:
            raise ValueError("transform() needs at least one state")
        infos = [s if isinstance(s, StateInfo) else StateInfo.from_descriptor(s) for s in states]
        names = [s.name for s in infos]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"State {sorted(dup)[0]!r} is given twice")
        for what, mapping in (("columns", columns or {}), ("types", types or {})):
            extra = [n for n in mapping if n not in names]
            if extra:
                raise KeyError(f"{what} names states that are not written: {extra}")
        return StateBootstrapTransformation(
            self._df,
            self._key_column,
            self._key_type,
            infos,
            columns or {},
            types or {},
            parallelism,
        )


class OneInputOperatorTransformation:
    """A DataFrame to bootstrap state from; ``key_by`` says which column is the key."""

    def __init__(self, df: Any) -> None:
        self._df = df

    def key_by(
        self, key_column: str, key_type: ti.TypeInformation | None = None
    ) -> KeyedOperatorTransformation:
        """Key the rows by ``key_column``. ``key_type`` says which Python objects the keys
        are (the job's ``key_by`` selector returns them; they are pickled, as sparkpoint jobs
        do): without it, structs become tuples and other values their natural type."""
        if key_column not in self._df.columns:
            raise KeyError(
                f"The DataFrame has no column {key_column!r} "
                f"(columns: {', '.join(self._df.columns)})"
            )
        return KeyedOperatorTransformation(self._df, key_column, key_type)


class OperatorTransformation:
    """Entry point of a bootstrap transformation (Flink's ``OperatorTransformation``)."""

    @staticmethod
    def bootstrap_with(df: Any) -> OneInputOperatorTransformation:
        """Bootstrap state from the rows of ``df``."""
        return OneInputOperatorTransformation(df)


class SavepointWriter:
    """Builds a savepoint from new operators' DataFrames and kept operators of an old one."""

    def __init__(
        self, spark: Any, max_parallelism: int, existing: Snapshot | None = None, keep: str = "copy"
    ) -> None:
        if keep not in ("copy", "reference"):
            raise ValueError(f"keep must be 'copy' or 'reference', got {keep!r}")
        check_parallelism_preconditions(1, max_parallelism)
        self.spark = spark
        self.max_parallelism = max_parallelism
        self._existing = existing
        # The savepoint is signed with the key of the snapshot it starts from, else with the
        # process's (sparkpoint.snapshot.signing-key; ``trust.use_by_default``).
        self.trust = existing.trust if existing is not None else default_trust()
        self._keep = keep
        self._kept: dict[str, OperatorState] = (
            {op.operator_id: op for op in existing.metadata.operator_states} if existing else {}
        )
        self._new: dict[str, StateBootstrapTransformation] = {}
        self._renames: dict[str, str] = {}
        # Failure-injection hook (tests): called in the task with the subtask index after
        # it wrote its key-group stream, before it reports the handle.
        self.after_subtask_write: Any = None

    @staticmethod
    def new_savepoint(spark: Any, max_parallelism: int) -> SavepointWriter:
        """An empty savepoint whose operators get ``max_parallelism`` key groups."""
        return SavepointWriter(spark, max_parallelism)

    @staticmethod
    def from_existing_savepoint(
        spark: Any,
        path: str,
        keep: str = "copy",
        *,
        configuration: Mapping[str, Any] | None = None,
    ) -> SavepointWriter:
        """Start from the savepoint (or retained checkpoint) at ``path``: its operators and
        master state (source positions, pending commits) are kept unless removed. Kept
        operators are copied into the new savepoint (``keep="copy"``, self-contained) or
        referenced where they are (``keep="reference"``: fast, but the new savepoint then
        needs the old files). New operators get the largest max parallelism found.
        ``configuration``: the ``sparkpoint.snapshot.*`` keys, as ``SavepointReader.read``."""
        trust = None if configuration is None else SnapshotTrust.from_config(configuration)
        snapshot = Snapshot.load(path, trust)
        ops = snapshot.metadata.operator_states
        if not ops:
            raise ValueError(f"The snapshot {snapshot.pointer} holds no operator state")
        return SavepointWriter(spark, max(op.max_parallelism for op in ops), snapshot, keep)

    def remove_operator(self, uid: str) -> SavepointWriter:
        """Drop operator ``uid`` (kept or added)."""
        if uid not in self._kept and uid not in self._new:
            raise KeyError(
                f"No operator {uid!r} to remove (operators: "
                f"{', '.join(map(repr, [*self._kept, *self._new])) or 'none'})"
            )
        self._kept.pop(uid, None)
        self._new.pop(uid, None)
        return self

    def with_operator(
        self, uid: str, transformation: StateBootstrapTransformation
    ) -> SavepointWriter:
        """Add operator ``uid`` with the state of ``transformation``."""
        if not isinstance(transformation, StateBootstrapTransformation):
            raise TypeError(
                "with_operator() takes the result of OperatorTransformation"
                ".bootstrap_with(df).key_by(...).transform(...)"
            )
        if uid in self._kept or uid in self._new:
            raise ValueError(
                f"The savepoint already contains uid {uid!r}. All uid's must be "
                "unique (remove_operator first to replace its state)"
            )
        self._new[uid] = transformation
        return self

    def change_operator_identifier(self, old_uid: str, new_uid: str) -> SavepointWriter:
        """Write the state of ``old_uid`` under ``new_uid`` (applied after everything else)."""
        self._renames[old_uid] = new_uid
        return self

    # -- write --------------------------------------------------------------------------

    def _check_kept_key_groups(self) -> None:
        """Keyed state of a snapshot before format version 2 is in other key groups (see
        ``state/key_groups.py``): it can be read and written anew, not kept as it is."""
        version = self._existing.metadata.format_version if self._existing else None
        if version is None or version >= KEY_GROUPS_SINCE_FORMAT:
            return
        old = [
            uid
            for uid, op in self._kept.items()
            if any(s.managed_keyed_state for s in op.subtask_states.values())
        ]
        if old:
            raise ValueError(
                f"Operators {old} keep keyed state from a snapshot of _metadata format version "
                f"{version}, whose key groups are not PyFlink's; read their state with "
                "SavepointReader, remove_operator(uid), and add it back with "
                "with_operator(uid, ...)"
            )

    def write(self, path: str, file_state_size_threshold: int | None = None) -> str:
        """Write the savepoint into the new directory ``path`` and return it.

        State streams of at most ``file_state_size_threshold`` bytes (default: the
        configured inline threshold, 20 KiB) are stored inside ``_metadata``.
        """
        if not self._kept and not self._new:
            raise ValueError("Savepoint must contain at least one operator to be created.")
        self._check_kept_key_groups()
        threshold = (
            CheckpointingOptions.FS_SMALL_FILE_THRESHOLD.default
            if file_state_size_threshold is None
            else file_state_size_threshold
        )
        target = SavepointTarget(
            path.rstrip("/") or path, threshold, CheckpointingOptions.FS_WRITE_BUFFER_SIZE.default
        )
        fs = get_filesystem(target.path)
        if self._existing is not None and target.path == self._existing.pointer.rstrip("/"):
            raise ValueError(
                f"Cannot write the savepoint over the one it is made from: {target.path}"
            )
        if fs.exists(target.path) and (not fs.is_dir(target.path) or fs.list(target.path)):
            raise StorageError(
                f"The savepoint target {target.path} exists and is not an "
                "empty directory; choose a new path"
            )
        fs.mkdirs(target.path)
        try:
            states = [self._write_operator(uid, t, target) for uid, t in self._new.items()]
            kept = list(self._kept.values())
            if self._keep == "copy":
                kept = self._copy(kept, target)
            else:
                kept = [_map_stream_handles(op, _absolute) for op in kept]
            operators = tuple(self._renamed(op) for op in [*kept, *states])
            metadata = CheckpointMetadata(
                self._existing.metadata.checkpoint_id if self._existing else 0,
                operators,
                self._master_states(operators),
                CheckpointProperties.for_savepoint(),
            )
            _delete_unreferenced(target.path, metadata)
            write_metadata(target.stream_factory(), metadata, signing_key=self.trust.signing_key)
        except BaseException:
            fs.delete(target.path, recursive=True)
            raise
        return target.path

    def _master_states(self, operators: Sequence[OperatorState]) -> tuple[MasterState, ...]:
        """The existing snapshot's master states, less its statistics (they describe it,
        not the savepoint written here), and the key hash rule of every operator written."""
        kept: tuple[MasterState, ...] = ()
        recorded: dict[str, str] = {}
        if self._existing is not None:
            existing = self._existing.metadata
            kept = tuple(
                m
                for m in existing.master_states
                if m.name not in (STATS_MASTER_STATE, KEY_HASH_MASTER_STATE)
            )
            recorded = recorded_key_hash_rules(existing) or {}
        rules = {self._renames.get(uid, uid): recorded.get(uid, VALUE_RULE) for uid in self._kept}
        rules.update({uid: rule_of(KeyGroupAssigner(t.key_type)) for uid, t in self._new.items()})
        written = {op.operator_id for op in operators}
        return (
            *kept,
            key_hash_master_state({op: r for op, r in rules.items() if op in written}),
        )

    def _renamed(self, op: OperatorState) -> OperatorState:
        new = self._renames.get(op.operator_id)
        return op if new is None else dataclasses.replace(op, operator_id=new)

    def _write_operator(
        self, uid: str, t: StateBootstrapTransformation, target: SavepointTarget
    ) -> OperatorState:
        from pyspark.sql import functions as F

        max_p = self.max_parallelism
        parallelism = t.parallelism or min(max_p, self.spark.sparkContext.defaultParallelism)
        check_parallelism_preconditions(parallelism, max_p)
        df = t.df
        key_field = _field(df, t.key_column, uid)
        inputs = []
        for info in t.states:
            column = t.columns.get(info.name, info.name)
            inputs.append(_state_input(info, _field(df, column, uid), t.types.get(info.name), uid))
        key_cfgs = {_config(s.key_type) for s in t.states}
        if len(key_cfgs) > 1:
            raise ValueError(f"Operator {uid!r}: the states record different key types")
        key_raw = is_pickled_field(key_field)
        if key_raw and not is_pickled(t.states[0].key_type):
            raise ValueError(
                f"Operator {uid!r}: the key column holds pickle bytes but the "
                f"keys are typed {t.states[0].key_type!r}"
            )
        key_type = None if t.key_type is None else t.key_type.get_serializer().snapshot_config()
        encoder = RowEncoder(
            uid, inputs, key_raw, key_type, max_p, parallelism, int(time.time() * 1000)
        )
        writer = SubtaskWriter(uid, inputs, max_p, parallelism, target, self.after_subtask_write)
        setup = ExecutorSetup(self.trust.pickle_allowed(self.trust.signed))

        def encode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            return encoder.encode(batches)

        def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            from pyspark import TaskContext

            setup.apply()
            tc = TaskContext.get()
            subtask = tc.partitionId() if tc is not None else 0
            handle = writer.write(subtask, batches)
            if handle is not None:
                yield pa.record_batch(
                    [
                        pa.array([subtask], pa.int32()),
                        pa.array([pickle.dumps(handle, protocol=5)], pa.binary()),
                    ],
                    names=["sub", "handle"],
                )

        selected = df.select(
            F.col(t.key_column), *(F.col(t.columns.get(s.name, s.name)) for s in t.states)
        )
        encoded = selected.mapInArrow(encode, spark_schema(encoder.schema))
        rows = (
            encoded.repartitionById(parallelism, "sub")
            .sortWithinPartitions("kg")
            .mapInArrow(write, "sub int, handle binary")
            .collect()
        )
        subtasks = {
            int(r[0]): OperatorSubtaskState(managed_keyed_state=(pickle.loads(r[1]),)) for r in rows
        }
        return OperatorState(uid, parallelism, max_p, subtasks)

    def _copy(self, ops: list[OperatorState], target: SavepointTarget) -> list[OperatorState]:
        """Copy every state file of ``ops`` into the target directory (Spark tasks, one per
        file) and point the handles at the copies."""
        files: dict[str, FileStateHandle] = {}
        for op in ops:
            _map_stream_handles(op, lambda h: _collect_file(h, files))
        if not files:
            return ops
        fs = get_filesystem(target.path)
        names = {path: str(uuid.uuid4()) for path in files}
        jobs = [(path, fs.join(target.path, names[path])) for path in files]
        setup = ExecutorSetup(self.trust.pickle_allowed(self.trust.signed))

        def copy(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            setup.apply()
            for src, dst in payloads(batches):
                _copy_file(src, dst)
            yield pa.record_batch([pa.array([1], pa.int32())], names=["done"])

        payload_frame(self.spark, jobs).mapInArrow(copy, "done int").collect()

        def moved(h: StreamStateHandle) -> StreamStateHandle:
            if not isinstance(h, FileStateHandle):
                return h
            name = names[h.path]
            return RelativeFileStateHandle(
                fs.join(target.path, name), h.size, name, digest=h.digest
            )

        return [_map_stream_handles(op, moved) for op in ops]


# -- helpers ----------------------------------------------------------------------------


def _config(info: ti.TypeInformation) -> str:
    return json.dumps(info.get_serializer().snapshot_config(), sort_keys=True)


def _field(df: Any, column: str, uid: str) -> Any:
    for f in df.schema.fields:
        if f.name == column:
            return f
    raise KeyError(
        f"Operator {uid!r}: the DataFrame has no column {column!r} "
        f"(columns: {', '.join(df.columns)})"
    )


def _state_input(
    info: StateInfo, field: Any, hint: ti.TypeInformation | None, uid: str
) -> StateInput:
    """How a column becomes ``info``'s state, after checking that its type fits."""
    from pyspark.sql.pandas.types import to_arrow_type

    what = f"Operator {uid!r}, state {info.name!r} (column {field.name!r})"
    recorded = state_column_type(info.kind, info.value_type, info.user_key_type)
    cfg = recorded.get_serializer().snapshot_config()
    raw = is_pickled_field(field)
    actual = to_arrow_type(field.dataType)
    if raw:
        if raw_pickle_config(cfg) == cfg:
            raise ValueError(
                f"{what}: the column holds pickle bytes (read from untyped state) "
                f"but the state is typed {cfg}"
            )
        expected: ti.TypeInformation | None = type_info_from_config(raw_pickle_config(cfg))
    elif hint is not None:
        expected = hint
    else:
        expected = recorded if raw_pickle_config(cfg) == cfg else None  # typed: check it
    if expected is not None and not _fits(actual, arrow_type(expected)):
        raise TypeError(
            f"{what} is {field.dataType.simpleString()}, but the state needs "
            f"{arrow_type(expected)} ({cfg}); cast the column first"
        )
    column = None if raw or expected is None else expected.get_serializer().snapshot_config()
    return StateInput(info.meta().to_json(), raw, column)


def _fits(actual: pa.DataType, expected: pa.DataType) -> bool:
    """Whether column values of ``actual`` can be written as ``expected`` without loss."""
    t = pa.types
    if actual.equals(expected):
        return True
    if t.is_integer(actual) and t.is_integer(expected):
        return bool(actual.bit_width <= expected.bit_width)
    if t.is_floating(actual) and t.is_floating(expected):
        return bool(actual.bit_width <= expected.bit_width)
    if t.is_timestamp(actual) and t.is_timestamp(expected):
        return (actual.tz is None) == (expected.tz is None)
    if (t.is_list(actual) or t.is_large_list(actual)) and t.is_list(expected):
        return _fits(actual.value_type, expected.value_type)
    if t.is_map(actual) and t.is_map(expected):
        return _fits(actual.key_type, expected.key_type) and _fits(
            actual.item_type, expected.item_type
        )
    if t.is_struct(actual) and t.is_struct(expected):
        return actual.num_fields == expected.num_fields and all(
            _fits(actual.field(i).type, expected.field(i).type) for i in range(actual.num_fields)
        )
    return False


def _map_stream_handles(op: OperatorState, fn: Any) -> OperatorState:
    """``op`` with every stream handle of its subtasks replaced by ``fn(handle)``."""

    def keyed(h: KeyedStateHandle) -> KeyedStateHandle:
        if isinstance(h, KeyGroupsStateHandle):
            return dataclasses.replace(h, delegate=fn(h.delegate))
        if isinstance(h, IncrementalRemoteKeyedStateHandle):
            return dataclasses.replace(
                h,
                shared_state=tuple(
                    HandleAndLocalPath(fn(x.handle), x.local_path) for x in h.shared_state
                ),
                private_state=tuple(
                    HandleAndLocalPath(fn(x.handle), x.local_path) for x in h.private_state
                ),
                meta_state_handle=fn(h.meta_state_handle),
            )
        if isinstance(h, ChangelogStateBackendHandle):
            return dataclasses.replace(
                h,
                materialized=tuple(keyed(m) for m in h.materialized),
                changelog=tuple(fn(e) for e in h.changelog),
            )
        raise TypeError(f"Cannot keep keyed state handles of type {type(h).__name__}")

    def operator(h: OperatorStateHandle) -> OperatorStateHandle:
        return dataclasses.replace(h, delegate=fn(h.delegate))

    subtasks = {
        i: dataclasses.replace(
            s,
            managed_keyed_state=tuple(keyed(h) for h in s.managed_keyed_state),
            raw_keyed_state=tuple(keyed(h) for h in s.raw_keyed_state),
            managed_operator_state=tuple(operator(h) for h in s.managed_operator_state),
            raw_operator_state=tuple(operator(h) for h in s.raw_operator_state),
        )
        for i, s in op.subtask_states.items()
    }
    return dataclasses.replace(op, subtask_states=subtasks)


def _absolute(h: StreamStateHandle) -> StreamStateHandle:
    """A file recorded relative to its old directory, recorded by absolute path instead."""
    if isinstance(h, RelativeFileStateHandle):
        return FileStateHandle(h.path, h.size, digest=h.digest)
    return h


def _collect_file(h: StreamStateHandle, files: dict[str, FileStateHandle]) -> StreamStateHandle:
    if isinstance(h, FileStateHandle):
        files[h.path] = h
    return h


def _copy_file(src: str, dst: str) -> None:
    """Copy one state file (no overwrite)."""
    src_fs, dst_fs = get_filesystem(src), get_filesystem(dst)
    with src_fs.open_input(src) as inp, dst_fs.open_output(dst, overwrite=False) as out:
        while chunk := inp.read(1 << 20):
            out.write(chunk)


def _delete_unreferenced(path: str, metadata: CheckpointMetadata) -> None:
    """Delete the files in ``path`` (a new directory) that ``metadata`` does not reference:
    what failed or speculative attempts of Spark tasks left behind."""
    fs = get_filesystem(path)
    referenced: set[str] = set()

    def collect(h: StreamStateHandle) -> StreamStateHandle:
        if isinstance(h, RelativeFileStateHandle):
            referenced.add(h.relative_path)
        return h

    for op in metadata.operator_states:
        _map_stream_handles(op, collect)
    for info in fs.list(path):
        if not info.is_dir and fs.name(info.path) not in referenced:
            fs.delete(info.path)
