"""Reading operator (non-keyed) list state of a Flink savepoint, pure Python.

A subtask's operator state stream (Flink's ``DefaultOperatorStateBackendSnapshotStrategy``)
starts with ``OperatorBackendSerializationProxy``: its version, whether the states are
Snappy-compressed (a boolean, as a real Flink 2.3 savepoint shows), the operator states' meta
infos (a short count, then each as keyed state writes them: name, backend type, options,
serializer snapshots) and the broadcast states' meta infos. Then each state's elements, each
at an offset ``_metadata`` records (``OperatorStateHandle``), in the state's serializer.
Only elements of byte arrays are read here (``BytePrimitiveArraySerializer``: an int length
and the bytes), as sources keep their splits (``SimpleVersionedListState``).
"""

from __future__ import annotations

from sparkpoint.state_processor.flink.binary import DataInput
from sparkpoint.state_processor.flink.errors import FlinkFormatError, UnsupportedFlinkStateError
from sparkpoint.state_processor.flink.keyed_state import StateMetaInfo, read_state_meta_info
from sparkpoint.state_processor.flink.metadata import OperatorStateHandle

__all__ = ["DISTRIBUTION_MODES", "read_byte_array_list_state", "read_operator_state_header"]

PROXY_VERSIONS = (6,)  # OperatorBackendSerializationProxy versions read (Flink 1.7 on)
DISTRIBUTION_MODES = ("SPLIT_DISTRIBUTE", "UNION", "BROADCAST")


def read_operator_state_header(
    data: bytes, what: str
) -> tuple[dict[str, StateMetaInfo], dict[str, StateMetaInfo], int]:
    """The stream's operator and broadcast state meta infos by name, and where the header
    ends."""
    inp = DataInput(data, what)
    version = inp.i32()
    if version not in PROXY_VERSIONS:
        raise FlinkFormatError(
            f"{what}: operator state serialization proxy version {version}; this reader knows "
            f"{', '.join(map(str, PROXY_VERSIONS))}"
        )
    if inp.boolean():
        raise UnsupportedFlinkStateError(
            f"{what}: the operator state is Snappy-compressed "
            "(execution.checkpointing.snapshot-compression), which is not read for operator "
            "state; take the savepoint without compression"
        )
    found: list[dict[str, StateMetaInfo]] = []
    for kind in ("operator", "broadcast"):
        n = inp.i16()
        if n < 0:
            raise inp.fail(f"{n} {kind} states")
        metas = [read_state_meta_info(inp) for _ in range(n)]
        found.append({m.name: m for m in metas})
    return found[0], found[1], inp.pos


def read_byte_array_list_state(handle: OperatorStateHandle, name: str, what: str) -> list[bytes]:
    """The elements of the list state ``name`` (byte arrays) in one subtask's stream; an
    empty list when the subtask has none. Each element's offset is checked to lie in the
    stream's state bytes, and the state's serializer to be the byte array one."""
    entry = handle.states.get(name)
    if entry is None:
        return []
    mode, offsets = entry
    if DISTRIBUTION_MODES[mode] != "SPLIT_DISTRIBUTE":
        raise UnsupportedFlinkStateError(
            f"{what}: operator state {name!r} is {DISTRIBUTION_MODES[mode]} state; only "
            "split-distributed list state is read"
        )
    if handle.stream is None:
        raise FlinkFormatError(f"{what}: operator state {name!r} without a stream")
    data = handle.stream.read()
    operator_states, _, header_end = read_operator_state_header(data, what)
    meta = operator_states.get(name)
    if meta is None:
        raise FlinkFormatError(
            f"{what}: _metadata names operator state {name!r}, its stream has "
            f"{sorted(operator_states) or 'none'}"
        )
    serializer = meta.serializers.get("VALUE_SERIALIZER")
    if meta.backend_type != "OPERATOR" or serializer is None or serializer.kind != "bytes":
        raise UnsupportedFlinkStateError(
            f"{what}: operator state {name!r} is {meta.backend_type} state of "
            f"{serializer.describe() if serializer else 'no'} serializer; only list state of "
            "byte arrays is read"
        )
    out = []
    for offset in offsets:
        if offset < header_end or offset >= len(data):
            raise FlinkFormatError(
                f"{what}: an element of operator state {name!r} at offset {offset}, outside "
                f"the stream's state bytes {header_end}..{len(data)}"
            )
        out.append(DataInput(data, what, offset).sized_bytes(f"an element of {name!r}"))
    return out
