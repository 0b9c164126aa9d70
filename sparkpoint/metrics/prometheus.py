"""Prometheus text exposition (format 0.0.4) of a job's metrics, named as Flink's
``PrometheusReporter`` names them: ``flink_taskmanager_job_task_operator_<groups>_<name>``
for operator metrics and ``flink_jobmanager_job_<name>`` for job metrics, the scope's
variables as labels (a key/value group's key is part of the name, its value a label)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from sparkpoint.metrics.sample import MetricKind, MetricValue

__all__ = ["CONTENT_TYPE", "escape_label_value", "metric_name", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OPERATOR_PREFIX = "flink_taskmanager_job_task_operator"
JOB_PREFIX = "flink_jobmanager_job"
_INVALID = re.compile(r"[^a-zA-Z0-9:_]")
_INVALID_LABEL = re.compile(r"[^a-zA-Z0-9_]")


def _name_part(text: str) -> str:
    """Flink's ``replaceInvalidChars``: every character outside [a-zA-Z0-9:_] becomes _."""
    return _INVALID.sub("_", text)


def metric_name(value: MetricValue) -> str:
    """The Prometheus metric name of ``value``."""
    prefix = JOB_PREFIX if value.operator_id is None else OPERATOR_PREFIX
    parts = [prefix] + [_name_part(name) for name, _v in value.key.groups]
    parts.append(_name_part(value.key.name))
    return "_".join(parts)


def _label_name(text: str) -> str:
    name = _INVALID_LABEL.sub("_", text)
    return "_" + name if not name or name[0].isdigit() else name


def escape_label_value(text: str) -> str:
    """A label value as the exposition format wants it: backslash, quote, newline escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(value: MetricValue) -> dict[str, str]:
    labels = {"job_id": value.job_id, "job_name": value.job_name}
    if value.operator_id is not None:
        labels["operator_id"] = value.operator_id
        labels["operator_name"] = value.operator_name or ""
        if value.subtask is not None:
            labels["subtask_index"] = str(value.subtask)
    for name, variable in value.key.groups:
        if variable is not None:
            label = _label_name(name)
            while label in labels:  # a variable named like a scope label keeps both
                label += "_"
            labels[label] = variable
    return labels


def _number(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    f = float(value)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    return repr(f)


def _line(name: str, labels: dict[str, str], value: Any) -> str:
    inner = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels.items())
    return f"{name}{{{inner}}} {_number(value)}"


def _samples(value: MetricValue) -> list[tuple[str, str, Any]]:
    """(family name, type, number) of each sample ``value`` exports (none without a value)."""
    name = metric_name(value)
    if value.value is None:
        return []
    if value.kind is MetricKind.DISTRIBUTION:
        d = value.value
        out: list[tuple[str, str, Any]] = [
            (name, "summary", ("_count", d["count"])),
            (name, "summary", ("_sum", d["sum"])),
        ]
        if d["count"]:
            out += [(name + "_min", "gauge", d["min"]), (name + "_max", "gauge", d["max"])]
        return out
    if value.kind is MetricKind.METER:  # as Flink: a meter is exported as its rate
        return [(name, "gauge", value.value["rate"])]
    # Flink exports counters as gauges too (a counter can go down).
    return [(name, "gauge", value.value)]


def render(values: Iterable[MetricValue]) -> str:
    """The exposition text of ``values``: one ``# TYPE`` line per family, then its samples."""
    families: dict[str, tuple[str, list[str]]] = {}
    for value in values:
        labels = _labels(value)
        for family, kind, number in _samples(value):
            lines = families.setdefault(family, (kind, []))[1]
            if kind == "summary":
                suffix, number = number
                lines.append(_line(family + suffix, labels, number))
            else:
                lines.append(_line(family, labels, number))
    out: list[str] = []
    for family, (kind, lines) in families.items():
        out.append(f"# TYPE {family} {kind}")
        out.extend(lines)
    return "\n".join(out) + "\n" if out else ""
