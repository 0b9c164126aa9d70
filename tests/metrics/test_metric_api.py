"""PyFlink's metric API (``sparkpoint.metrics``): groups, scopes, the four metric kinds, and
the task-side table that reports them and starts them from the driver's values."""

from __future__ import annotations

import pytest

from sparkpoint.metrics import Counter, Distribution, Meter, MetricGroup
from sparkpoint.metrics.registry import TaskMetrics
from sparkpoint.metrics.sample import MetricKey, MetricKind, MetricValue


def test_each_counter_counts_alone() -> None:
    # The stand-in this replaces returned the group itself: a.inc() counted into b.
    group = MetricGroup()
    a, b = group.counter("a"), group.counter("b")
    a.inc()
    a.inc(4)
    b.dec(2)
    assert (a.get_count(), b.get_count()) == (5, -2)
    assert group.counter("a") is a
    assert isinstance(a, Counter)


def test_meter_distribution_and_gauge() -> None:
    group = MetricGroup()
    meter = group.meter("m", time_span_in_seconds=30)
    meter.mark_event()
    meter.mark_event(9)
    assert isinstance(meter, Meter) and meter.get_count() == 10
    assert meter.time_span_in_seconds == 30
    dist = group.distribution("d")
    for v in (4, -1, 7):
        dist.update(v)
    assert isinstance(dist, Distribution)
    assert (dist.count, dist.sum, dist.min, dist.max) == (3, 10, -1, 7)
    group.gauge("g", lambda: 3)
    assert group.metrics["g"]() == 3
    with pytest.raises(ValueError, match="time_span_in_seconds must be above 0, not 0"):
        group.meter("bad", time_span_in_seconds=0)
    with pytest.raises(TypeError, match="gauge 'x' needs a callable"):
        group.gauge("x", 5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="metric name must be a non-empty string"):
        group.counter("")


def test_key_value_groups_scope_as_pyflink() -> None:
    group = MetricGroup()
    kv = group.add_group("topic", "orders")
    assert kv.get_metric_group_scope() == ("topic", "orders")
    assert group.add_group("topic", "orders") is kv
    assert group.add_group("topic", "payments") is not kv
    inner = kv.add_group("inner")
    assert inner.get_metric_group_scope() == ("topic", "orders", "inner")
    assert group.add_group("topic") is not kv  # a plain group is not the key/value one


def test_task_reports_every_metric_of_every_operator_once() -> None:
    task = TaskMetrics()
    g = task.group("op1")
    assert task.group("op1") is g
    g.counter("c").inc(3)
    g.add_group("k", "v").distribution("d").update(5)
    g.meter("m", 10).mark_event(2)
    g.gauge("g", lambda: 1.5)
    g.gauge("broken", lambda: 1 / 0)
    g.gauge("text", lambda: "high")
    task.group("op2").counter("c").inc()
    samples = {(s.operator_id, s.key.scope_components()): s for s in task.samples()}
    assert len(samples) == 5  # the failing and non-numeric gauges are left out
    assert samples[("op1", ("c",))].value == 3
    assert samples[("op1", ("c",))].kind is MetricKind.COUNTER
    assert samples[("op1", ("k", "v", "d"))].value == (1, 5, 5, 5)
    assert samples[("op1", ("m",))].time_span_s == 10
    assert samples[("op1", ("g",))].value == 1.5
    assert samples[("op2", ("c",))].value == 1


def test_metrics_start_from_the_values_the_driver_holds() -> None:
    bases = {
        "op": {
            MetricKey((), "c"): 40,
            MetricKey((("k", "v"),), "d"): (2, 10, 3, 7),
            MetricKey((), "m"): 5,
        }
    }
    g = TaskMetrics(bases).group("op")
    c = g.counter("c")
    assert c.get_count() == 40
    c.inc()
    d = g.add_group("k", "v").distribution("d")
    d.update(1)
    assert (d.count, d.sum, d.min, d.max) == (3, 11, 1, 7)
    assert g.meter("m").get_count() == 5
    assert g.counter("other").get_count() == 0


def test_identifier_is_flinks_scope() -> None:
    key = MetricKey((("grp", None), ("k", "v")), "n")
    op = MetricValue("id", "job", "op-id", "Map", 2, key, MetricKind.COUNTER, 1)
    assert op.identifier == "job.Map.2.grp.k.v.n"
    job = MetricValue("id", "job", None, None, None, MetricKey((), "uptime"), MetricKind.GAUGE, 1)
    assert job.identifier == "job.uptime"


# pyflink/metrics/metricbase.py (PyFlink 2.3): the module's names and their methods.
PYFLINK_METRICS = {
    "MetricGroup": {"add_group", "counter", "gauge", "meter", "distribution"},
    "Metric": set(),
    "Counter": {"inc", "dec", "get_count"},
    "Meter": {"mark_event", "get_count"},
    "Distribution": {"update"},
}


def test_pyflink_metrics_module_is_complete() -> None:
    import sparkpoint.metrics as module

    assert set(PYFLINK_METRICS) <= set(module.__all__)
    for name, methods in PYFLINK_METRICS.items():
        cls = getattr(module, name)
        assert methods <= set(dir(cls)), (name, methods - set(dir(cls)))
    assert issubclass(module.Counter, module.Metric)
    from sparkpoint.datastream.functions import MetricGroup

    assert MetricGroup is module.MetricGroup


def test_distribution_values_wait_in_a_list_until_folded() -> None:
    # update() is the pending list's own append: nothing is summarised per value.
    task = TaskMetrics({"op": {MetricKey((), "d"): (2, 10, 3, 7)}})
    dist = task.group("op").distribution("d")
    for v in (9, 1, 4):
        dist.update(v)
    pending = dist.update.__self__  # type: ignore[attr-defined]
    assert pending == [9, 1, 4]
    task.fold()  # what the task does after every batch
    assert pending == []
    assert (dist.count, dist.sum, dist.min, dist.max) == (5, 24, 1, 9)
    dist.update(0.5)
    assert (dist.count, dist.sum, dist.min, dist.max) == (6, 24.5, 0.5, 9)  # read: folded
    empty = Distribution()
    assert (empty.count, empty.sum, empty.min, empty.max) == (0, 0, None, None)


def test_distribution_given_a_non_number_names_itself_and_the_value() -> None:
    task = TaskMetrics()
    dist = task.group("op").add_group("parser", "orders").distribution("sizes")
    dist.update(3)
    dist.update("12")  # type: ignore[arg-type]
    with pytest.raises(
        TypeError,
        match=r"Distribution 'parser.orders.sizes' takes numbers: update\(\) was given '12' "
        r"\(str\)",
    ):
        task.fold()
    # The batch's values are dropped; the distribution goes on from before them.
    dist.update(5)
    assert (dist.count, dist.sum, dist.min, dist.max) == (1, 5, 5, 5)


def test_a_copied_or_pickled_distribution_records_into_its_own_list() -> None:
    import copy
    import pickle

    dist = MetricGroup().distribution("d")
    dist.update(3)
    for clone in (copy.copy(dist), copy.deepcopy(dist), pickle.loads(pickle.dumps(dist))):
        clone.update(5)
        assert (clone.count, clone.sum, clone.min, clone.max) == (2, 8, 3, 5)
    assert (dist.count, dist.sum, dist.min, dist.max) == (1, 3, 3, 3)
