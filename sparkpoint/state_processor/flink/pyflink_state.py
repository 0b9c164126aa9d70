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
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.errors import CorruptStateError
from sparkpoint.state import pickling
from sparkpoint.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    StateDescriptor,
    StateKind,
)
from sparkpoint.state.table import TtlValue
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
from sparkpoint.state_processor.flink.timers import FlinkTimer, TimerPlan

__all__ = ["PYTHON_STATE_PREFIX", "PyFlinkKeyedState", "find_operator", "read_pyflink_keyed_state"]

PYTHON_STATE_PREFIX = "python-state-"
LIST_DELIMITER = 0x2C  # RocksDB's list state format: elements joined by ','


@dataclass
class PyFlinkKeyedState:
    """One operator's keyed state: per Python key, per state name, its value (a value, a
    list, or a dict for MAP state; for state in ``TimeWindow`` namespaces a dict from
    ``(start, end)`` to that), and its pending timers."""

    uid: str
    parallelism: int
    max_parallelism: int
    values: dict[Any, dict[str, Any]]
    timers: list[FlinkTimer] = field(default_factory=list)
    windowed_states: set[str] = field(default_factory=set)  # those in TimeWindow namespaces


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
    timers: list[FlinkTimer] = []
    windowed: dict[tuple[Any, str, tuple[int, int]], dict[str, Any]] = {}
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
                if isinstance(plan, TimerPlan):
                    ts, row, namespace = plan.read(entry)
                    key = _key_of_row(row, plan.key_snapshot, where)
                    timers.append(FlinkTimer(plan.domain, ts, key, namespace))
                    continue
                key = keys.get(entry.key)
                if key is None:
                    key = _python_key(key_read, header.key_serializer, entry.key, where)
                    keys[entry.key] = key
                states = values.setdefault(key, {})
                if isinstance(plan, _StatePlan) and plan.window is not None:
                    window = plan.window(DataInput(entry.namespace, f"{plan.where}: a window"))
                    states = windowed.setdefault((key, plan.name, window), {})
                plan.add(states, entry.user_key, entry.value, key)
    for (key, name, window), states in windowed.items():
        values.setdefault(key, {}).setdefault(name, {})[window] = states[name]
    names = {name for _, name, _ in windowed}
    return PyFlinkKeyedState(uid, op.parallelism, op.max_parallelism, values, timers, names)


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
    return _key_of_row(row, snap, where)


def _key_of_row(row: Any, snap: SerializerSnapshot, where: str) -> Any:
    """The Python key of PyFlink's key ``Row``: its one field, unpickled when untyped."""
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
        # With a StateTtlConfig the Java state's elements are TtlValues: the last access
        # timestamp (a long) before each element's bytes.
        snap = meta.serializers.get("VALUE_SERIALIZER")
        self.ttl = snap is not None and any(n.kind == "ttl" for n in snap.nested)
        _check_ttl(desc, self.ttl, self.where)
        if isinstance(desc, MapStateDescriptor):
            self.user_key = coder_of(desc.key_type_info, f"{self.where}: a map key", True)
            self.value = coder_of(desc.value_type_info, f"{self.where}: a map value", True)
        elif isinstance(desc, ListStateDescriptor):
            self.value = coder_of(desc.elem_type_info, f"{self.where}: an element", True)
        else:
            self.value = coder_of(desc.type_info, f"{self.where}: a value", True)
        ns = meta.serializers.get("NAMESPACE_SERIALIZER")
        if ns is None or ns.kind not in ("void", "time_window"):
            raise UnsupportedFlinkStateError(
                f"{self.where}: namespace {ns.describe() if ns else None}; only state "
                "outside windows (VoidNamespace) and of time windows (TimeWindow) is imported"
            )
        # state of a window: per TimeWindow namespace, read as (start, end)
        self.window = value_decoder(ns) if ns.kind == "time_window" else None
        if self.window is not None and desc.kind in (StateKind.VALUE, StateKind.MAP):
            raise UnsupportedFlinkStateError(
                f"{self.where}: state in window namespaces read by a {desc.kind.value} "
                "descriptor; PyFlink's window contents are LIST (process, apply), REDUCING "
                "(reduce) or AGGREGATING (aggregate) state"
            )

    def add(self, states: dict[str, Any], user_key: bytes | None, value: bytes, key: Any) -> None:
        if self.kind is StateKind.MAP:
            assert user_key is not None
            uk = decode_element(self.user_key, _byte_array(user_key, self.where), self.where)
            inp = DataInput(value, f"{self.where}: a map value")
            if inp.boolean():  # null
                v: Any = None
            else:
                ts = inp.i64() if self.ttl else None
                v = decode_element(self.value, inp.sized_bytes("a map value"), self.where)
                if ts is not None:
                    v = TtlValue(v, ts)
                if inp.remaining:
                    raise inp.fail("bytes after a map value")
            states.setdefault(self.name, {})[uk] = v
            return
        stored = _list_elements(value, self.where, self.ttl)
        if self.kind is StateKind.LIST:
            # A stored element holds every value one append sent (Beam's bag appends):
            # the coder's values one after another.
            states[self.name] = [
                v if ts is None else TtlValue(v, ts) for ts, e in stored for v in self._values(e)
            ]
            return
        elements = [
            decode_element(self.value, e, self.where)
            if ts is None
            else TtlValue(decode_element(self.value, e, self.where), ts)
            for ts, e in stored
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
        self.ttl = False
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
        _check_ttl(desc, self.ttl, self.where)

    def _reader(self, snap: SerializerSnapshot, info: Any) -> Any:
        from sparkpoint.state import typeinfo as ti

        if snap.kind == "ttl":  # TtlValue: the last access timestamp, then the value
            self.ttl = True
            stamp, user = snap.nested
            if stamp.kind != "long":
                raise UnsupportedFlinkStateError(
                    f"{self.where}: a TTL timestamp of {stamp.describe()}"
                )
            inner = self._reader(user, info)

            def read_ttl(inp: DataInput) -> TtlValue:
                ts = inp.i64()
                return TtlValue(inner(inp), ts)

            return read_ttl
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


def _check_ttl(desc: StateDescriptor, flink_ttl: bool, where: str) -> None:
    """Flink restores TTL'd state only into a descriptor with a TTL, and the other way
    round (the serializers differ): so does the import."""
    if flink_ttl and not desc.ttl_enabled:
        raise UnsupportedFlinkStateError(
            f"{where}: the savepoint's state has a time-to-live (StateTtlConfig) and the "
            "descriptor has none; enable the same TTL on the descriptor "
            "(descriptor.enable_time_to_live(...)), as the program does"
        )
    if desc.ttl_enabled and not flink_ttl:
        raise UnsupportedFlinkStateError(
            f"{where}: the descriptor has a time-to-live and the savepoint's state has none; "
            "Flink would not restore it so either: pass the descriptor the program had"
        )


def _byte_array(data: bytes, where: str) -> bytes:
    inp = DataInput(data, f"{where}: a byte array")
    out = inp.sized_bytes("a byte array")
    if inp.remaining:
        raise inp.fail("bytes after a byte array")
    return out


def _list_elements(data: bytes, where: str, ttl: bool = False) -> list[tuple[int | None, bytes]]:
    """A list state value in RocksDB's format: byte arrays (int length, bytes) joined by
    the delimiter byte, each after its TTL timestamp (a long) when ``ttl``; as
    ``(timestamp or None, bytes)``."""
    inp = DataInput(data, f"{where}: a list")
    out: list[tuple[int | None, bytes]] = []
    while True:
        ts = inp.i64() if ttl else None
        out.append((ts, inp.sized_bytes("a list element")))
        if not inp.remaining:
            return out
        if inp.byte() != LIST_DELIMITER:
            raise inp.fail("list elements not separated by the delimiter")


def _plans(
    header: KeyedStateStream, wanted: Mapping[str, StateDescriptor], where: str
) -> list[_StatePlan | _ThreadModePlan | TimerPlan]:
    plans: list[_StatePlan | _ThreadModePlan | TimerPlan] = []
    found = set()
    for meta in header.states:
        if meta.backend_type == "PRIORITY_QUEUE":
            plans.append(TimerPlan(meta, where))
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
            # Thread mode keeps Reducing and Aggregating state as a Java ValueState of the
            # value (the accumulator) type (PyFlink's to_java_state_descriptor).
            expected = desc.kind.value if desc.kind.value in ("LIST", "MAP") else "VALUE"
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
