"""State descriptors with PyFlink's signatures: a name, type information and options."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from sparkpoint.state.functions import AggregateFunction, ReduceFunction, as_reduce_function
from sparkpoint.state.ttl import StateTtlConfig
from sparkpoint.state.typeinfo import (
    ListTypeInfo,
    MapTypeInfo,
    PickledBytesTypeInfo,
    TypeInformation,
)

__all__ = [
    "AggregatingStateDescriptor",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "ReducingStateDescriptor",
    "StateDescriptor",
    "StateKind",
    "ValueStateDescriptor",
]


class StateKind(enum.Enum):
    """The kind of a keyed state (recorded in snapshot meta info)."""

    VALUE = "VALUE"
    LIST = "LIST"
    MAP = "MAP"
    REDUCING = "REDUCING"
    AGGREGATING = "AGGREGATING"


def _type_or_pickle(type_info: TypeInformation | None) -> TypeInformation:
    if type_info is None:
        return PickledBytesTypeInfo()
    if not isinstance(type_info, TypeInformation):
        raise TypeError(
            "type information must be a TypeInformation (see Types), got "
            f"{type(type_info).__name__}"
        )
    return type_info


class StateDescriptor:
    """Names a keyed state and says how its values are typed (base of the descriptors)."""

    kind: StateKind

    def __init__(self, name: str, type_info: TypeInformation | None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"State name must be a non-empty string, got {name!r}")
        self.name = name
        self.type_info = _type_or_pickle(type_info)
        self._ttl_config: StateTtlConfig | None = None

    def get_name(self) -> str:
        """The state name (unique per operator)."""
        return self.name

    def enable_time_to_live(self, ttl_config: StateTtlConfig) -> None:
        """Expire entries after the configured TTL."""
        if not isinstance(ttl_config, StateTtlConfig):
            raise TypeError(f"ttl_config must be a StateTtlConfig, got {type(ttl_config).__name__}")
        self._ttl_config = ttl_config

    def get_ttl_config(self) -> StateTtlConfig | None:
        """The TTL configuration, if any."""
        return self._ttl_config

    @property
    def ttl_enabled(self) -> bool:
        """Whether TTL applies."""
        return self._ttl_config is not None and self._ttl_config.is_enabled()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, type_info={self.type_info!r})"


class ValueStateDescriptor(StateDescriptor):
    """A single value per key."""

    kind = StateKind.VALUE

    def __init__(self, name: str, value_type_info: TypeInformation | None = None) -> None:
        super().__init__(name, value_type_info)


class ListStateDescriptor(StateDescriptor):
    """A list per key; ``type_info`` is the LIST type, ``elem_type_info`` its element."""

    kind = StateKind.LIST

    def __init__(self, name: str, elem_type_info: TypeInformation | None = None) -> None:
        self.elem_type_info = _type_or_pickle(elem_type_info)
        super().__init__(name, ListTypeInfo(self.elem_type_info))


class MapStateDescriptor(StateDescriptor):
    """A map per key."""

    kind = StateKind.MAP

    def __init__(
        self,
        name: str,
        key_type_info: TypeInformation | None = None,
        value_type_info: TypeInformation | None = None,
    ) -> None:
        self.key_type_info = _type_or_pickle(key_type_info)
        self.value_type_info = _type_or_pickle(value_type_info)
        super().__init__(name, MapTypeInfo(self.key_type_info, self.value_type_info))


class ReducingStateDescriptor(StateDescriptor):
    """A value per key that ``add`` combines with the reduce function."""

    kind = StateKind.REDUCING

    def __init__(
        self,
        name: str,
        reduce_function: ReduceFunction | Callable[[Any, Any], Any],
        type_info: TypeInformation | None = None,
    ) -> None:
        super().__init__(name, type_info)
        self._reduce_function = as_reduce_function(reduce_function)

    def get_reduce_function(self) -> ReduceFunction:
        """The reduce function."""
        return self._reduce_function


class AggregatingStateDescriptor(StateDescriptor):
    """An accumulator per key that ``add`` feeds through an AggregateFunction."""

    kind = StateKind.AGGREGATING

    def __init__(
        self,
        name: str,
        agg_function: AggregateFunction,
        state_type_info: TypeInformation | None = None,
    ) -> None:
        if not isinstance(agg_function, AggregateFunction):
            raise TypeError(
                f"agg_function must be an AggregateFunction, got {type(agg_function).__name__}"
            )
        super().__init__(name, state_type_info)
        self._agg_function = agg_function

    def get_agg_function(self) -> AggregateFunction:
        """The aggregate function."""
        return self._agg_function
