"""PyFlink's keyed state in a Flink savepoint, as Python objects per key.

PyFlink (process mode, its default) keeps each Python state in a Java state named
``python-state-<name>``: Value, List, Reducing and Aggregating state as a
``ListState<byte[]>`` (a Value state is a list of one element), Map state as a
``MapState<byte[], byte[]>``; the elements are the bytes of PyFlink's coders for the
state's type (``pyflink_coders``). The key is a ``Row`` of the key: for a ``key_by``
without ``key_type`` one field holding the pickled key. Flink's files do not record the
Python types (every element is ``byte[]``), so the program's state descriptors say how
to decode them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sparkpoint.errors import CorruptStateError
from sparkpoint.state import pickling
from sparkpoint.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    StateDescriptor,
    StateKind,
)
from sparkpoint.state_processor.flink.binary import DataInput
from sparkpoint.state_processor.flink.errors import FlinkFormatError, UnsupportedFlinkStateError
from sparkpoint.state_processor.flink.keyed_state import (
    KeyedStateStream,
    StateMetaInfo,
    read_keyed_state_header,
    read_keyed_state_stream,
)
from sparkpoint.state_processor.flink.metadata import (
    FlinkMetadata,
    FlinkOperatorState,
    KeyGroupsHandle,
)
from sparkpoint.state_processor.flink.pyflink_bulk import (
    Declined,
    paused_gc,
    read_subtask_bulk,
)
from sparkpoint.state_processor.flink.pyflink_coders import coder_of, decode_element
from sparkpoint.state_processor.flink.serializers import SerializerSnapshot, value_decoder

__all__ = ["PYTHON_STATE_PREFIX", "PyFlinkKeyedState", "find_operator", "read_pyflink_keyed_state"]

PYTHON_STATE_PREFIX = "python-state-"
LIST_DELIMITER = 0x2C  # RocksDB's list state format: elements joined by ','


@dataclass
class PyFlinkKeyedState:
    """One operator's keyed state: per Python key, per state name, its value (a value, a
    list, or a dict for MAP state)."""

    uid: str
    parallelism: int
    max_parallelism: int
    values: dict[Any, dict[str, Any]]


def find_operator(metadata: FlinkMetadata, uid: str, what: str) -> FlinkOperatorState:
    """The operator of ``uid``; refused naming the operators there are when it is absent,
    and above all those without a uid (their state cannot be matched to the program)."""
    op = metadata.operator(uid)
    if op is not None:
        return op
    with_state = [o for o in metadata.operators if any(s.managed_keyed_state for s in o.subtasks)]
    named = sorted(o.uid for o in metadata.operators if o.uid)
    nameless = [o for o in with_state if not o.uid]
    msg = f"{what}: no operator with uid {uid!r}; operators with a uid: {named or 'none'}"
    if nameless:
        names = ", ".join(f"{o.operator_id} ({o.name or 'unnamed'})" for o in nameless)
        msg += (
            f"; operators with keyed state but without a uid (only a hash is stored, which "
            f"cannot be matched to a program's operator): {names}. Set .uid(...) on every "
            "stateful operator, take a new savepoint on Flink (restoring the old one with "
            "allowNonRestoredState is not needed: uids given to unchanged operators whose "
            "hashes differ lose their state), and import that"
        )
    raise UnsupportedFlinkStateError(msg)


def read_pyflink_keyed_state(
    metadata: FlinkMetadata,
    uid: str,
    descriptors: Sequence[StateDescriptor],
    what: str,
    allow_pickle: bool = False,
) -> PyFlinkKeyedState:
    """Decode the keyed state of ``uid``'s operator for ``descriptors``: every state a
    descriptor names must be there with a matching kind; states of the savepoint no
    descriptor names are refused (they would be lost). Pickles load under ``allow_pickle``."""
    from sparkpoint.state_processor.flink.pyflink_coders import pickle_policy

    op = find_operator(metadata, uid, what)
    wanted = {d.name: d for d in descriptors}
    values: dict[Any, dict[str, Any]] = {}
    with pickle_policy(allow_pickle):
        for sub in op.subtasks:
            handle = sub.managed_keyed_state
            if handle is None:
                continue
            if sub.raw_keyed_state is not None:
                raise UnsupportedFlinkStateError(
                    f"{what}: operator {uid!r} has raw keyed state, which is not imported"
                )
            where = f"{what}: operator {uid!r} subtask {sub.index}"
            if not handle.savepoint:
                raise UnsupportedFlinkStateError(
                    f"{where}: the keyed state is not in the canonical savepoint format (a "
                    "checkpoint, or a native-format savepoint); take a canonical savepoint "
                    "(the default: flink stop --savepointPath ..., without --type native)"
                )
            if _read_bulk(handle, op.max_parallelism, wanted, values, where):
                continue
            header, entries = read_keyed_state_stream(handle, op.max_parallelism, where)
            plans = _plans(header, wanted, where)
            key_read = value_decoder(header.key_serializer)
            keys: dict[bytes, Any] = {}
            for state_id, entry in entries:
                plan = plans[state_id]
                if plan is None:
                    raise UnsupportedFlinkStateError(
                        f"{where}: state {header.states[state_id].name!r} holds timers; "
                        "timers are not imported yet (stop the job when none is pending, or "
                        "re-register them in open() after the restore)"
                    )
                key = keys.get(entry.key)
                if key is None:
                    key = _python_key(key_read, header.key_serializer, entry.key, where)
                    keys[entry.key] = key
                plan.add(values.setdefault(key, {}), entry.user_key, entry.value, key)
    return PyFlinkKeyedState(uid, op.parallelism, op.max_parallelism, values)


def _read_bulk(
    handle: KeyGroupsHandle,
    max_parallelism: int,
    wanted: Mapping[str, StateDescriptor],
    values: dict[Any, dict[str, Any]],
    where: str,
) -> bool:
    """Read the subtask in bulk (``pyflink_bulk``) into ``values`` as the loop above would;
    False when that reader declines it (then it is read entry by entry)."""
    data, header = read_keyed_state_header(handle, where)
    plans = _plans(header, wanted, where)
    states = [(wanted[p.name], p.add) if isinstance(p, _StatePlan) else None for p in plans]
    try:
        with paused_gc():
            bulk = read_subtask_bulk(data, header, handle, max_parallelism, states, where)
    except Declined:
        return False
    if values.keys().isdisjoint(bulk):  # keys of one subtask only (as Flink places them)
        values.update(bulk)
        return True
    for key, got in bulk.items():
        mine = values.get(key)
        if mine is None:
            values[key] = got
            continue
        for name, v in got.items():  # a key of an earlier subtask: as plan.add merges
            if wanted[name].kind is StateKind.MAP:
                mine.setdefault(name, {}).update(v)
            else:
                mine[name] = v
    return True


def _python_key(read: Any, snap: SerializerSnapshot, data: bytes, where: str) -> Any:
    inp = DataInput(data, f"{where}: a key")
    row = read(inp)
    if snap.kind != "row" or len(row) != 1:
        raise UnsupportedFlinkStateError(
            f"{where}: the key serializer is {snap.describe()}, not PyFlink's Row of one key field"
        )
    (field,) = row
    if snap.nested[0].kind == "bytes":
        if not isinstance(field, bytes | bytearray | memoryview):
            raise FlinkFormatError(f"{where}: a key holds {type(field).__name__}, not bytes")
        try:
            return pickling.loads(field, f"{where}: a pickled key")
        except CorruptStateError as e:
            raise FlinkFormatError(f"{where}: a key is not a valid pickle: {e}") from e
    return field


class _StatePlan:
    """How the entries of one Flink state become one Python state's values."""

    def __init__(self, desc: StateDescriptor, meta: StateMetaInfo, where: str) -> None:
        self.name = desc.name
        self.kind = desc.kind
        self.where = f"{where}, state {desc.name!r}"
        if isinstance(desc, MapStateDescriptor):
            self.user_key = coder_of(desc.key_type_info, f"{self.where}: a map key", True)
            self.value = coder_of(desc.value_type_info, f"{self.where}: a map value", True)
        elif isinstance(desc, ListStateDescriptor):
            self.value = coder_of(desc.elem_type_info, f"{self.where}: an element", True)
        else:
            self.value = coder_of(desc.type_info, f"{self.where}: a value", True)
        ns = meta.serializers.get("NAMESPACE_SERIALIZER")
        if ns is None or ns.kind != "void":
            raise UnsupportedFlinkStateError(
                f"{self.where}: namespace {ns.describe() if ns else None}; only state "
                "outside windows (VoidNamespace) is imported"
            )

    def add(self, states: dict[str, Any], user_key: bytes | None, value: bytes, key: Any) -> None:
        if self.kind is StateKind.MAP:
            assert user_key is not None
            uk = decode_element(self.user_key, _byte_array(user_key, self.where), self.where)
            inp = DataInput(value, f"{self.where}: a map value")
            if inp.boolean():  # null
                v = None
            else:
                v = decode_element(self.value, inp.sized_bytes("a map value"), self.where)
                if inp.remaining:
                    raise inp.fail("bytes after a map value")
            states.setdefault(self.name, {})[uk] = v
            return
        if self.kind is StateKind.LIST:
            # A stored element holds every value one append sent (Beam's bag appends):
            # the coder's values one after another.
            states[self.name] = [
                v for e in _list_elements(value, self.where) for v in self._values(e)
            ]
            return
        elements = [
            decode_element(self.value, e, self.where) for e in _list_elements(value, self.where)
        ]
        if len(elements) != 1:
            raise FlinkFormatError(
                f"{self.where}: key {key!r} holds {len(elements)} elements, a "
                f"{self.kind.value} state holds one"
            )
        states[self.name] = elements[0]

    def _values(self, element: bytes) -> list[Any]:
        inp = DataInput(element, f"{self.where}: a list element")
        out = []
        while inp.remaining:
            out.append(self.value(inp))
        return out


class _ThreadModePlan:
    """PyFlink's thread mode keeps Python state as Java state of the state's own name and
    Java type: the values are in Flink's serializers (a LONG as a long, a STRING as Flink's
    string, a pickled value as a byte array holding the pickle), as a real savepoint shows."""

    def __init__(self, desc: StateDescriptor, meta: StateMetaInfo, where: str) -> None:
        self.name = desc.name
        self.kind = desc.kind
        self.where = f"{where}, state {desc.name!r}"
        snap = meta.serializers.get("VALUE_SERIALIZER")
        ns = meta.serializers.get("NAMESPACE_SERIALIZER")
        if snap is None or ns is None or ns.kind != "void":
            raise UnsupportedFlinkStateError(
                f"{self.where}: serializers {sorted(meta.serializers)}; only state outside "
                "windows with a value serializer is imported"
            )
        if isinstance(desc, MapStateDescriptor):
            if snap.kind != "map":
                raise UnsupportedFlinkStateError(f"{self.where}: a MAP of {snap.describe()}")
            key_snap, value_snap = snap.nested
            self.user_key = self._reader(key_snap, desc.key_type_info)
            self.value = self._reader(value_snap, desc.value_type_info)
        elif isinstance(desc, ListStateDescriptor):
            if snap.kind != "list":
                raise UnsupportedFlinkStateError(f"{self.where}: a LIST of {snap.describe()}")
            self.value = self._reader(snap.nested[0], desc.elem_type_info)
        else:
            self.value = self._reader(snap, desc.type_info)

    def _reader(self, snap: SerializerSnapshot, info: Any) -> Any:
        from sparkpoint.state import typeinfo as ti

        read = value_decoder(snap)
        if isinstance(info, ti.PickledBytesTypeInfo):
            if snap.kind != "bytes":
                raise UnsupportedFlinkStateError(
                    f"{self.where}: pickled values in a {snap.describe()} serializer"
                )
            what = f"{self.where}: a pickled value"

            def unpickle(inp: DataInput) -> Any:
                try:
                    return pickling.loads(read(inp), what)
                except CorruptStateError as e:
                    raise FlinkFormatError(f"{what} is not a valid pickle: {e}") from e

            return unpickle
        return read

    def add(self, states: dict[str, Any], user_key: bytes | None, value: bytes, key: Any) -> None:
        if self.kind is StateKind.MAP:
            assert user_key is not None
            uk = decode_element(self.user_key, user_key, self.where)
            inp = DataInput(value, f"{self.where}: a map value")
            v = None if inp.boolean() else self.value(inp)
            if inp.remaining:
                raise inp.fail("bytes after a map value")
            states.setdefault(self.name, {})[uk] = v
        elif self.kind is StateKind.LIST:
            inp = DataInput(value, f"{self.where}: a list")
            out = [self.value(inp)]
            while inp.remaining:
                if inp.byte() != LIST_DELIMITER:
                    raise inp.fail("list elements not separated by the delimiter")
                out.append(self.value(inp))
            states[self.name] = out
        else:
            states[self.name] = decode_element(self.value, value, self.where)


def _byte_array(data: bytes, where: str) -> bytes:
    inp = DataInput(data, f"{where}: a byte array")
    out = inp.sized_bytes("a byte array")
    if inp.remaining:
        raise inp.fail("bytes after a byte array")
    return out


def _list_elements(data: bytes, where: str) -> list[bytes]:
    """A list state value in RocksDB's format: byte arrays (int length, bytes) joined by
    the delimiter byte."""
    inp = DataInput(data, f"{where}: a list")
    out = []
    while True:
        out.append(inp.sized_bytes("a list element"))
        if not inp.remaining:
            return out
        if inp.byte() != LIST_DELIMITER:
            raise inp.fail("list elements not separated by the delimiter")


def _plans(
    header: KeyedStateStream, wanted: Mapping[str, StateDescriptor], where: str
) -> list[_StatePlan | _ThreadModePlan | None]:
    plans: list[_StatePlan | _ThreadModePlan | None] = []
    found = set()
    for meta in header.states:
        if meta.backend_type == "PRIORITY_QUEUE":
            plans.append(None)  # PyFlink registers its timer services always; refused if used
            continue
        thread_mode = not meta.name.startswith(PYTHON_STATE_PREFIX)
        name = meta.name if thread_mode else meta.name[len(PYTHON_STATE_PREFIX) :]
        desc = wanted.get(name)
        if desc is None:
            raise UnsupportedFlinkStateError(
                f"{where}: the savepoint has state {name!r}, which no descriptor given "
                f"names (given: {sorted(wanted)}); pass its descriptor so it is not lost"
            )
        flink_type = meta.state_type
        if thread_mode:
            expected = desc.kind.value
            if expected not in ("VALUE", "LIST", "MAP"):
                raise UnsupportedFlinkStateError(
                    f"{where}: state {name!r} is thread-mode (Java) {flink_type} state; only "
                    "VALUE, LIST and MAP state of PyFlink's thread mode are imported"
                )
        else:
            expected = "MAP" if desc.kind is StateKind.MAP else "LIST"
        if flink_type != expected:
            raise UnsupportedFlinkStateError(
                f"{where}: state {name!r} is a Flink {flink_type} state; the descriptor "
                f"{desc!r} needs {expected} (PyFlink keeps {desc.kind.value} state so)"
            )
        plans.append(
            _ThreadModePlan(desc, meta, where) if thread_mode else _StatePlan(desc, meta, where)
        )
        found.add(name)
    return plans
