"""Key placement by the declared key type (issue 29): as PyFlink hashes it (the goldens
a31/a32 of tests/differential are the end-to-end proof); untyped keys keep the value rule."""

from __future__ import annotations

import numpy as np
import pytest

from sparkpoint.common import Types
from sparkpoint.datastream.functions import KeySelectorFunctionWrapper, TypedKeySelector
from sparkpoint.state.key_groups import (
    UNTYPED_KEYS,
    KeyGroupAssigner,
    assign_to_key_group,
    key_group_assigner_of,
)

KEYS = [-(2**63), -(2**40), -3_000_000_000, -(2**31) - 1, -100, -5, -1, 0, 1, 5, 2**31, 2**63 - 1]


def test_a_long_key_hashes_as_long_hash_code() -> None:
    long_keys = KeyGroupAssigner(Types.LONG())
    # Long.hashCode(-5) = 4, Integer.hashCode(-5) = -5: PyFlink puts -5 on subtask 0 of 3
    assert long_keys.key_group(-5, 128) * 3 // 128 == 0
    assert assign_to_key_group(-5, 128) * 3 // 128 == 2  # the value rule (untyped keys)
    for key in [0, 1, 5, 2**31, -(2**31) - 1]:  # where Long and the value rule agree
        assert long_keys.key_group(key, 128) == assign_to_key_group(key, 128)


def test_the_vectorised_long_path_equals_the_per_key_one() -> None:
    long_keys = KeyGroupAssigner(Types.LONG())
    groups = long_keys.int64_key_groups(KEYS, 128)
    assert groups is not None and groups.dtype == np.int32
    assert groups.tolist() == [long_keys.key_group(k, 128) for k in KEYS]
    assert long_keys.int64_key_groups(["a"], 128) is None


@pytest.mark.parametrize(
    "key_type", [None, Types.INT(), Types.SHORT(), Types.BYTE(), Types.STRING()]
)
def test_types_whose_hash_is_the_value_rule_stay_untyped(key_type: object) -> None:
    assigner = KeyGroupAssigner(key_type)
    assert assigner == UNTYPED_KEYS and assigner.type_name is None
    assert assigner.key_group(-5, 128) == assign_to_key_group(-5, 128)


def test_float_double_and_boolean_hash_as_java() -> None:
    floats, doubles = KeyGroupAssigner(Types.FLOAT()), KeyGroupAssigner(Types.DOUBLE())
    booleans = KeyGroupAssigner(Types.BOOLEAN())
    assert doubles.key_group(2.5, 128) == assign_to_key_group(2.5, 128)  # Double.hashCode
    assert doubles.key_group(3, 128) == assign_to_key_group(3.0, 128)  # of an integral value
    assert floats.key_group(2.5, 128) != assign_to_key_group(2.5, 128)  # Float.hashCode
    assert booleans.key_group(1, 128) == assign_to_key_group(True, 128)
    assert floats.key_group(None, 128) == assign_to_key_group(None, 128)


def test_key_by_wraps_only_selectors_whose_type_changes_the_hash() -> None:
    from sparkpoint.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection([1, 2, 3], type_info=Types.LONG())
    typed = ds.key_by(lambda v: v, key_type=Types.LONG())._node.key_selector
    assert isinstance(typed, TypedKeySelector) and typed.get_key(-5) == -5
    assert key_group_assigner_of(typed) == KeyGroupAssigner(Types.LONG())
    plain = ds.key_by(lambda v: v, key_type=Types.INT())._node.key_selector
    assert isinstance(plain, KeySelectorFunctionWrapper)
    assert key_group_assigner_of(plain) is UNTYPED_KEYS
