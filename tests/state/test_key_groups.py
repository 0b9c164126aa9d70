"""Key groups: Flink's vectors, stable key hashes, ranges and routing (property tests)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.state.key_groups import (
    assign_key_groups_int64,
    assign_to_key_group,
    check_parallelism_preconditions,
    compute_default_max_parallelism,
    compute_key_group_for_key_hash,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
    int64_key_groups,
    key_hash,
    murmur_hash,
    row_hash,
)
from sparkpoint.types import Row


def test_murmur_vectors() -> None:
    assert [murmur_hash(i) for i in (0, 1, 2, 42)] == [593689054, 68075478, 1085422463, 1134849565]
    # Java Flink keys by the raw key; sparkpoint, as PyFlink, by Row.of(key) (hashCode + 62)
    assert [compute_key_group_for_key_hash(k, 128) for k in (0, 1, 2, 42)] == [94, 86, 127, 29]
    assert [row_hash(k) for k in (0, 1, -62, 2**31 - 1)] == [62, 63, 0, -(2**31) + 61]
    assert [assign_to_key_group(k, 128) for k in (0, 1, 2, 42)] == [33, 44, 97, 26]


def test_operator_index_vector() -> None:
    ops = [
        compute_operator_index_for_key_group(128, 5, assign_to_key_group(k, 128)) for k in range(10)
    ]
    assert ops == [1, 1, 3, 4, 0, 0, 4, 0, 3, 4]


def test_subtasks_pyflink_chose_for_typed_keys() -> None:
    """What PyFlink 2.3 printed for key_by(key_type=INT/STRING) at parallelism 3 (the
    golden of corpus program a29): the N of its ``int:N>``/``str:N>`` print prefixes."""
    golden = (
        (
            Path(__file__).parents[1]
            / "differential"
            / "goldens"
            / "programs"
            / "a29_typed_key_subtasks.out"
        )
        .read_text()
        .splitlines()
    )
    seen = {}
    for line in golden:
        prefix, text = line.split("> ", 1)
        seen[text.rsplit(" ", 1)[1]] = int(prefix.split(":")[1])
    assert len(seen) == 20
    for key, subtask in seen.items():
        value: int | str = key if key.startswith("k") else int(key)
        group = assign_to_key_group(value, 128)
        assert compute_operator_index_for_key_group(128, 3, group) + 1 == subtask, key


def test_ranges_vectors() -> None:
    assert [compute_key_group_range_for_operator_index(128, 2, i) for i in range(2)] == [
        KeyGroupRange(0, 63),
        KeyGroupRange(64, 127),
    ]
    assert [compute_key_group_range_for_operator_index(128, 3, i) for i in range(3)] == [
        KeyGroupRange(0, 42),
        KeyGroupRange(43, 85),
        KeyGroupRange(86, 127),
    ]


def test_default_max_parallelism() -> None:
    assert compute_default_max_parallelism(1) == 128
    assert compute_default_max_parallelism(85) == 128
    assert compute_default_max_parallelism(86) == 256
    assert compute_default_max_parallelism(1000) == 2048
    assert compute_default_max_parallelism(30000) == 32768
    with pytest.raises(ValueError, match="greater than 0"):
        compute_default_max_parallelism(0)


def test_preconditions() -> None:
    check_parallelism_preconditions(4, 32767)
    with pytest.raises(ValueError, match="Maximum parallelism must be between 1 and 32767"):
        check_parallelism_preconditions(1, 32768)
    with pytest.raises(ValueError, match="Maximum parallelism must be between 1 and 32767"):
        check_parallelism_preconditions(1, 0)
    with pytest.raises(ValueError, match="must not be smaller than parallelism"):
        check_parallelism_preconditions(10, 8)
    with pytest.raises(ValueError, match="operator_index 3"):
        compute_key_group_range_for_operator_index(128, 3, 3)


def test_java_hash_codes() -> None:
    # Values of Java's hashCode for the same keys.
    assert key_hash("hello") == 99162322
    assert key_hash("") == 0
    assert key_hash("Aa") == key_hash("BB") == 2112
    assert key_hash("héllo") == 103094734
    assert key_hash("😀") == 1772899  # surrogate pair \ud83d\ude00
    assert key_hash(-1) == -1
    assert key_hash(2**31) == -2147483648  # Long.hashCode(2^31)
    assert key_hash(2**32) == 1
    assert key_hash(-(2**40)) == -256  # Long.hashCode(-2^40): (int)(v ^ v>>>32)
    assert key_hash(True) == 1231 and key_hash(False) == 1237
    assert key_hash(None) == 0
    assert key_hash(1.5) == 1073217536  # Double.hashCode(1.5)
    assert key_hash(float("nan")) == 2146959360
    assert key_hash(b"\x01\xff") == (31 * (31 + 1) - 1)  # Arrays.hashCode(byte[]{1,-1})
    assert key_hash(("a", 1)) == 31 * (31 + 97) + 1
    assert key_hash(Row("a", 1)) == key_hash(("a", 1))


def test_other_keys_hash_through_pickle() -> None:
    import datetime as dt

    h = key_hash(dt.date(2024, 1, 2))
    assert h == key_hash(dt.date(2024, 1, 2))
    assert -(2**31) <= h < 2**31


_SCRIPT = (
    "from sparkpoint.state.key_groups import key_hash\n"
    "import datetime as dt\n"
    "print([key_hash(k) for k in ['abc', 'zß', b'xy', 12345678901, 3.25, ('k', 7, None),"
    " dt.date(2020, 5, 6), frozenset()]])\n"
)


def test_hash_stable_across_processes() -> None:
    outs = set()
    for seed in ("1", "2", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        out = subprocess.run(
            [sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, check=True
        ).stdout
        outs.add(out)
    assert len(outs) == 1


keys = st.one_of(
    st.integers(-(2**70), 2**70),
    st.text(max_size=20),
    st.binary(max_size=20),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),
    st.tuples(st.integers(), st.text(max_size=5)),
)


@settings(max_examples=200, deadline=None)
@given(max_p=st.integers(1, 32767), data=st.data())
def test_ranges_partition_and_routing_agrees(max_p: int, data: st.DataObject) -> None:
    p = data.draw(st.integers(1, min(max_p, 300)))
    ranges = [compute_key_group_range_for_operator_index(max_p, p, i) for i in range(p)]
    assert ranges[0].start_key_group == 0
    assert ranges[-1].end_key_group == max_p - 1
    for a, b in itertools.pairwise(ranges):
        assert b.start_key_group == a.end_key_group + 1
    for kg in data.draw(st.lists(st.integers(0, max_p - 1), max_size=30)):
        i = compute_operator_index_for_key_group(max_p, p, kg)
        assert ranges[i].contains(kg)


@settings(max_examples=300, deadline=None)
@given(key=keys, max_p=st.integers(1, 32767), data=st.data())
def test_every_key_owned_by_exactly_one_subtask(
    key: object, max_p: int, data: st.DataObject
) -> None:
    p = data.draw(st.integers(1, min(max_p, 200)))
    kg = assign_to_key_group(key, max_p)
    assert 0 <= kg < max_p
    owners = [
        i for i in range(p) if compute_key_group_range_for_operator_index(max_p, p, i).contains(kg)
    ]
    assert owners == [compute_operator_index_for_key_group(max_p, p, kg)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=200), st.integers(1, 32767))
def test_vectorised_assignment_matches(values: list[int], max_p: int) -> None:
    arr = np.array(values, dtype=np.int64)
    expected = [assign_to_key_group(v, max_p) for v in values]
    assert assign_key_groups_int64(arr, max_p).tolist() == expected
    assert assign_key_groups_int64(pa.array(values, pa.int64()), max_p).tolist() == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-(2**64), 2**64), max_size=50), st.integers(1, 32767))
def test_batch_assignment_of_python_ints(values: list[int], max_p: int) -> None:
    groups = int64_key_groups(values, max_p)
    if not values or not all(-(2**63) <= v < 2**63 for v in values):
        assert groups is None  # the per-key path serves them
    else:
        assert groups is not None
        assert groups.tolist() == [assign_to_key_group(v, max_p) for v in values]


def test_batch_assignment_refuses_keys_that_are_not_ints() -> None:
    assert int64_key_groups([1, True], 128) is None  # a bool key hashes as a bool
    assert int64_key_groups([1, 2.0], 128) is None
    assert int64_key_groups([1, "a"], 128) is None
