"""The examples of docs/state-processor.md run as written and print what the page shows."""

from __future__ import annotations

import os
import re
import shutil
from typing import Any

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "state-processor.md")


def test_state_processor_guide_examples_run(spark: Any, capsys: Any) -> None:
    with open(DOC) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert len(blocks) == 4
    ns: dict[str, Any] = {"__name__": "state_processor_guide"}
    try:
        for block in blocks:
            exec(compile(block, DOC, "exec"), ns)
        out = capsys.readouterr().out
    finally:
        if "work" in ns:
            shutil.rmtree(ns["work"], ignore_errors=True)
    assert sorted(ns["deposits"]) == [(1, 110, {"EUR": 70, "USD": 30}), (3, 40, {}), (4, 1, {})]
    assert "[('balance', 'VALUE'), ('by_currency', 'MAP')]" in out
    assert "max_parallelism=128, state_format='savepoint', state_size=" in out
    assert "|  2|      5|          {EUR -> 5}|" in out
    assert "|  1|by_currency|     USD|   30|" in out
    assert "[(1, 10000), (3, 4200)]" in out
