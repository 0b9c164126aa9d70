"""The Prometheus text exposition: Flink's names and labels, escaping of odd characters."""

from __future__ import annotations

from sparkpoint.metrics.prometheus import escape_label_value, metric_name, render
from sparkpoint.metrics.sample import MetricKey, MetricKind, MetricValue


def _op(key: MetricKey, kind: MetricKind, value: object, name: str = "Map") -> MetricValue:
    return MetricValue("j1", "job", "op-1", name, 0, key, kind, value)


def test_names_follow_flinks_reporter() -> None:
    user = _op(
        MetricKey((("my group", None), ("topic", "orders")), "records.in"), MetricKind.COUNTER, 3
    )
    assert metric_name(user) == "flink_taskmanager_job_task_operator_my_group_topic_records_in"
    job = MetricValue("j1", "job", None, None, None, MetricKey((), "uptime"), MetricKind.GAUGE, 5)
    assert metric_name(job) == "flink_jobmanager_job_uptime"


def test_exposition_escapes_and_labels() -> None:
    odd = 'we"ird\\name\nline'
    values = [
        _op(MetricKey((("topic", odd),), "n-é"), MetricKind.COUNTER, 7, name=odd),
        _op(MetricKey((), "numRecordsIn"), MetricKind.COUNTER, 12),
        _op(
            MetricKey((), "d"),
            MetricKind.DISTRIBUTION,
            {"count": 2, "sum": 3.5, "min": 1, "max": 2.5, "mean": 1.75},
        ),
        _op(MetricKey((), "w"), MetricKind.GAUGE, None),
        _op(MetricKey((), "m"), MetricKind.METER, {"count": 30, "rate": 0.5}),
        MetricValue("j1", "job", None, None, None, MetricKey((), "uptime"), MetricKind.GAUGE, 1.5),
    ]
    text = render(values)
    esc = 'we\\"ird\\\\name\\nline'
    assert escape_label_value(odd) == esc
    lines = text.splitlines()
    assert lines == [
        "# TYPE flink_taskmanager_job_task_operator_topic_n__ gauge",
        'flink_taskmanager_job_task_operator_topic_n__{job_id="j1",job_name="job",'
        f'operator_id="op-1",operator_name="{esc}",subtask_index="0",topic="{esc}"}} 7',
        "# TYPE flink_taskmanager_job_task_operator_numRecordsIn gauge",
        'flink_taskmanager_job_task_operator_numRecordsIn{job_id="j1",job_name="job",'
        'operator_id="op-1",operator_name="Map",subtask_index="0"} 12',
        "# TYPE flink_taskmanager_job_task_operator_d summary",
        'flink_taskmanager_job_task_operator_d_count{job_id="j1",job_name="job",'
        'operator_id="op-1",operator_name="Map",subtask_index="0"} 2',
        'flink_taskmanager_job_task_operator_d_sum{job_id="j1",job_name="job",'
        'operator_id="op-1",operator_name="Map",subtask_index="0"} 3.5',
        "# TYPE flink_taskmanager_job_task_operator_d_min gauge",
        'flink_taskmanager_job_task_operator_d_min{job_id="j1",job_name="job",'
        'operator_id="op-1",operator_name="Map",subtask_index="0"} 1',
        "# TYPE flink_taskmanager_job_task_operator_d_max gauge",
        'flink_taskmanager_job_task_operator_d_max{job_id="j1",job_name="job",'
        'operator_id="op-1",operator_name="Map",subtask_index="0"} 2.5',
        "# TYPE flink_taskmanager_job_task_operator_m gauge",
        'flink_taskmanager_job_task_operator_m{job_id="j1",job_name="job",'
        'operator_id="op-1",operator_name="Map",subtask_index="0"} 0.5',
        "# TYPE flink_jobmanager_job_uptime gauge",
        'flink_jobmanager_job_uptime{job_id="j1",job_name="job"} 1.5',
    ]
    assert text.endswith("\n")


def test_a_variable_named_like_a_scope_label_keeps_both() -> None:
    value = _op(MetricKey((("job_id", "mine"), ("9x", "y")), "c"), MetricKind.COUNTER, 1)
    line = render([value]).splitlines()[1]
    assert 'job_id="j1"' in line and 'job_id_="mine"' in line and '_9x="y"' in line
