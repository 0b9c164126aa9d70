"""``docs/configuration.md`` is generated from the option table and kept up to date."""

from __future__ import annotations

import pathlib

import pytest

from sparkpoint.config import all_options
from sparkpoint.config.docs import DEFAULT_PATH, main, render

_REPO = pathlib.Path(__file__).resolve().parents[2]


def test_committed_page_is_up_to_date() -> None:
    committed = (_REPO / DEFAULT_PATH).read_text(encoding="utf-8")
    assert committed == render(), "docs/configuration.md is stale: python -m sparkpoint.config.docs"


def test_page_lists_every_key_with_type_default_and_deprecated_keys() -> None:
    page = render()
    for option in all_options():
        row = next(line for line in page.splitlines() if line.startswith(f"| `{option.key}` |"))
        assert option.type.name in row
        for old in option.deprecated_keys:
            assert f"`{old}`" in row
    assert "| `execution.checkpointing.data-inline-threshold` | MemorySize | `20 kb` |" in page
    assert "| `execution.checkpointing.timeout` | Duration | `10 min` |" in page


def test_check_mode_reports_a_stale_page(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "configuration.md"
    assert main([str(page), "--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert main([str(page)]) == 0
    assert main([str(page), "--check"]) == 0
    page.write_text(page.read_text() + "edited\n")
    assert main([str(page), "--check"]) == 1
