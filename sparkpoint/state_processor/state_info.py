"""``StateInfo``: a keyed state as a snapshot records it (name, kind, types, TTL).

The reader returns one per state of an operator; the writer takes them, or PyFlink state
descriptors, to know how to encode a column. Plain Python; no Spark.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkpoint.state import typeinfo as ti
from sparkpoint.state.descriptors import StateDescriptor, StateKind
from sparkpoint.state.serializers import PickleSerializer
from sparkpoint.state.table import RegisteredStateMeta
from sparkpoint.state_processor.type_mapping import type_info_from_config

__all__ = ["StateInfo"]


@dataclass(frozen=True)
class StateInfo:
    """One keyed state: ``value_type`` is the type of a value (LIST: of an element; MAP: of
    a map value), ``user_key_type`` the type of a map key (MAP only). ``key_type`` is the
    type keys are written with: pickled (``PICKLED_BYTE_ARRAY``) for every sparkpoint job."""

    name: str
    kind: StateKind
    key_type: ti.TypeInformation
    value_type: ti.TypeInformation
    user_key_type: ti.TypeInformation | None = None
    ttl: bool = False

    @staticmethod
    def from_meta(meta: RegisteredStateMeta) -> StateInfo:
        """The state a snapshot header (or RocksDB registry) describes."""
        uk = meta.user_key_serializer
        return StateInfo(
            meta.name,
            meta.kind,
            type_info_from_config(meta.key_serializer.snapshot_config()),
            type_info_from_config(meta.value_serializer.snapshot_config()),
            None if uk is None else type_info_from_config(uk.snapshot_config()),
            meta.ttl,
        )

    @staticmethod
    def from_descriptor(desc: StateDescriptor) -> StateInfo:
        """The state a job registers with ``desc`` (keys pickled, as sparkpoint jobs do)."""
        if not isinstance(desc, StateDescriptor):
            raise TypeError(
                f"Expected a state descriptor or a StateInfo, got {type(desc).__name__}"
            )
        return StateInfo.from_meta(RegisteredStateMeta.from_descriptor(desc, PickleSerializer()))

    def meta(self) -> RegisteredStateMeta:
        """The meta info snapshots record for this state."""
        return RegisteredStateMeta(
            self.name,
            self.kind,
            self.key_type.get_serializer(),
            self.value_type.get_serializer(),
            None if self.user_key_type is None else self.user_key_type.get_serializer(),
            self.ttl,
        )
