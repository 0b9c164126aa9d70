"""The examples of docs/spark-writers.md and docs/spark-sources.md run as written (paths
moved under a temp dir, the source bounded)."""

from __future__ import annotations

import json
import os
import re
from typing import Any

DOCS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs"
)


def first_example(page: str) -> str:
    with open(os.path.join(DOCS, page)) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert blocks, f"no example in {page}"
    return str(blocks[0])


def run(code: str, tmp_path: Any) -> dict[str, Any]:
    scope: dict[str, Any] = {"__name__": "docs_example"}
    exec(compile(code.replace("/data/", f"{tmp_path}/data/"), "example", "exec"), scope)
    return scope


def test_spark_writers_example(spark: Any, tmp_path: Any) -> None:
    run(first_example("spark-writers.md"), tmp_path)
    rows = spark.read.parquet(f"{tmp_path}/data/squares").select("n", "square").collect()
    assert sorted(tuple(r) for r in rows) == [(n, n * n) for n in range(1000)]


def test_spark_sources_example(spark: Any, tmp_path: Any, capsys: Any) -> None:
    os.makedirs(tmp_path / "data" / "events")
    with open(tmp_path / "data" / "events" / "a.json", "w") as f:
        for i in range(100):
            f.write(json.dumps({"user": f"u{i % 3}", "amount": i}) + "\n")
    code = first_example("spark-sources.md")
    assert "end_batch=None" in code
    run(code.replace("end_batch=None", "end_batch=0"), tmp_path)
    lines = capsys.readouterr().out.splitlines()
    totals: dict[str, int] = {}
    for line in lines:
        user, total = re.sub(r"^\d+> ", "", line).strip("()").replace("'", "").split(", ")
        totals[user] = max(totals.get(user, 0), int(total))
    assert totals == {f"u{u}": sum(i for i in range(100) if i % 3 == u) for u in range(3)}
