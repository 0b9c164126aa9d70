"""Reference jobs shared by the runtime tests (importable by Spark's Python workers)."""

from __future__ import annotations

import ast
import os
from typing import Any

from sparkpoint.common import Encoder
from sparkpoint.connectors.number_seq import NumberSequenceSource
from sparkpoint.datastream.connectors.file_system import FileSink
from sparkpoint.testing import CountAndEcho, FailureInjector, expected_keyed_count_output


def counted_pairs(
    env: Any,
    n_events: int,
    n_keys: int,
    injector: FailureInjector | None = None,
    map_injector: FailureInjector | None = None,
) -> Any:
    """numbers -> (x % keys, x) -> key_by -> CountAndEcho: the stream the sink tests write."""

    def to_pair(x: int) -> tuple[int, int]:
        if map_injector is not None:
            map_injector.maybe_fail(x)
        return (x % n_keys, x)

    return (
        env.from_source(NumberSequenceSource(0, n_events - 1), None, "numbers")
        .uid("numbers")
        .map(to_pair)
        .uid("to-pair")
        .key_by(lambda p: p[0])
        .process(CountAndEcho(injector))
        .uid("count")
    )


def keyed_count_job(
    env: Any,
    out_dir: str,
    n_events: int,
    n_keys: int,
    injector: FailureInjector | None = None,
    map_injector: FailureInjector | None = None,
) -> None:
    """numbers -> (x % keys, x) -> key_by -> CountAndEcho -> exactly-once FileSink."""
    (
        counted_pairs(env, n_events, n_keys, injector, map_injector)
        .sink_to(FileSink.for_row_format(out_dir, Encoder.simple_string_encoder()).build())
        .uid("sink")
    )


def read_sink(out_dir: str) -> list[tuple[Any, ...]]:
    """Every committed line of the file sink (in-progress files are hidden, not read)."""
    lines: list[tuple[Any, ...]] = []
    if not os.path.isdir(out_dir):
        return lines
    for name in sorted(os.listdir(out_dir)):
        path = os.path.join(out_dir, name)
        if name.startswith(".") or os.path.isdir(path):
            continue
        with open(path) as f:
            lines.extend(ast.literal_eval(line) for line in f if line.strip())
    return lines


def check_keyed_count_output(out_dir: str, n_events: int, n_keys: int) -> None:
    """Assert that a keyed count job's sink holds every record once and every key's exact
    final count and sum."""
    recs, finals = expected_keyed_count_output(n_events, n_keys)
    out = read_sink(out_dir)
    echoed = [o for o in out if o[0] == "rec"]
    assert len(echoed) == n_events and set(echoed) == recs
    assert {o[1]: (o[2], o[3]) for o in out if o[0] == "final"} == finals
