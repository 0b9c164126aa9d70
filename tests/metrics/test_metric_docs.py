"""``docs/observing.md``'s metric list is generated from the catalog and kept up to date."""

from __future__ import annotations

import pathlib

from sparkpoint.metrics.catalog import SYSTEM_METRICS
from sparkpoint.metrics.docs import DEFAULT_PATH, render, update

_REPO = pathlib.Path(__file__).resolve().parents[2]


def test_committed_list_is_up_to_date() -> None:
    page = (_REPO / DEFAULT_PATH).read_text(encoding="utf-8")
    assert update(page) == page, "stale metric list: python -m sparkpoint.metrics.docs"


def test_list_names_every_metric_once() -> None:
    block = render()
    for metric in SYSTEM_METRICS:
        assert block.count(f"| `{metric.name}` |") == 1
    assert len({m.name for m in SYSTEM_METRICS}) == len(SYSTEM_METRICS)
