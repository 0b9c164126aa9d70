"""Keyed and operator state: the contracts, and the two backends in ``heap/`` and ``rocksdb/``.

This package holds what both backends share: the backend interfaces (``backend``), key groups,
descriptors and TTL, serializers and type information, the state objects written over the
``StateTable`` interface, and the snapshot and savepoint formats with their restore. Plain
Python (no Spark). The public PyFlink-shaped names are re-exported by
``sparkpoint.datastream.state``, ``sparkpoint.datastream`` (backends) and
``sparkpoint.common.typeinfo`` (``Types``); this package exports the engine-side pieces.
"""

from sparkpoint.state.backend import (
    KeyedStateBackend,
    KeyedStateBackendParameters,
    OperatorStateBackend,
    SnapshotType,
    StateBackendFactory,
)
from sparkpoint.state.key_groups import (
    assign_key_groups_int64,
    assign_to_key_group,
    compute_default_max_parallelism,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
    key_hash,
    murmur_hash,
)

__all__ = [
    "KeyedStateBackend",
    "KeyedStateBackendParameters",
    "OperatorStateBackend",
    "SnapshotType",
    "StateBackendFactory",
    "assign_key_groups_int64",
    "assign_to_key_group",
    "compute_default_max_parallelism",
    "compute_key_group_range_for_operator_index",
    "compute_operator_index_for_key_group",
    "key_hash",
    "murmur_hash",
]
