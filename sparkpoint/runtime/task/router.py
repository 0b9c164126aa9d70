"""The exits of a stage: each output edge groups records by the consumer's subtask, chosen
as Flink's ``StreamPartitioner`` of the edge chooses the channel.

Routers write rows ``(channel, KIND_DATA, (input_index, payload))``: the channel is the
consumer's subtask plus its offset in the exchange, the input index tells a consumer with
several inputs which edge (and which side of a two-input operator) the records belong to.
Channel choices that Flink leaves to chance (rebalance's first channel, shuffle) are made
deterministic per epoch and subtask, so a retried task sends every record where the first
attempt did.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from sparkpoint.runtime.operators.chain import Operator
from sparkpoint.runtime.operators.context import OperatorEnv
from sparkpoint.runtime.operators.type_crossing import crossing_converter
from sparkpoint.runtime.protocol import OutputRoute
from sparkpoint.runtime.task.records import KIND_DATA, encode_data
from sparkpoint.state.key_groups import key_group_assigner_of

__all__ = ["GROUP_TARGET", "Router", "rescale_targets"]

GROUP_TARGET = 8192  # records per data row before it is flushed


def rescale_targets(subtask: int, upstream: int, downstream: int) -> list[int]:
    """The consumer subtasks a pointwise (rescale) edge connects upstream ``subtask`` to, as
    Flink's ``EdgeManagerBuildUtil.connectPointwise`` does."""
    if upstream >= downstream:
        for t in range(downstream):
            if t * upstream // downstream <= subtask < (t + 1) * upstream // downstream:
                return [t]
        return [downstream - 1]
    start = (subtask * downstream + upstream - 1) // upstream
    end = ((subtask + 1) * downstream + upstream - 1) // upstream
    return list(range(start, end))


class Router(Operator):
    """One output edge of a stage."""

    def __init__(
        self, route: OutputRoute, out: list[tuple[int, int, Any]], output_type: Any = None
    ) -> None:
        super().__init__("router", "router")
        self.route = route
        self.out = out
        # Records leaving the stage cross to another task: converted by their declared type.
        self.convert = crossing_converter(output_type)
        part = route.partitioning
        self.kind = part.kind
        self.key_selector = part.key_selector
        self.key_group_assigner = key_group_assigner_of(part.key_selector)
        self.partitioner = part.partitioner
        self.parallelism = route.parallelism
        self.max_parallelism = route.max_parallelism
        self.groups: dict[int, tuple[list[Any], list[int | None] | None]] = {}
        self._cache: dict[Any, int] = {}

    def open(self, env: OperatorEnv) -> None:
        super().open(env)
        p = self.parallelism
        self._next = env.subtask_index % p  # rebalance: round robin from here
        self._random = random.Random(f"{env.epoch}/{env.subtask_index}/{self.route.input_index}")
        self._local = rescale_targets(env.subtask_index, env.parallelism, p)
        self._local_next = 0

    def push(self, values: list[Any], timestamps: list[int | None] | None) -> None:
        if self.convert is not None:
            values = self.convert(values)
        kind, p = self.kind, self.parallelism
        if kind == "hash":
            if p == 1:
                self._add(0, values, timestamps)
                return
            subs = self._subtasks([self.key_selector.get_key(v) for v in values])
        elif kind == "forward":
            self._add(self.env.subtask_index % p, values, timestamps)
            return
        elif kind == "global" or p == 1:
            self._add(0, values, timestamps)
            return
        elif kind == "broadcast":
            for sub in range(p):
                self._add(sub, values, timestamps)
            return
        elif kind == "rebalance":
            start = self._next
            subs = [(start + i) % p for i in range(len(values))]
            self._next = (start + len(values)) % p
        elif kind == "rescale":
            local, start = self._local, self._local_next
            subs = [local[(start + i) % len(local)] for i in range(len(values))]
            self._local_next = (start + len(values)) % len(local)
        elif kind == "shuffle":
            rnd = self._random.randrange
            subs = [rnd(p) for _ in values]
        else:  # custom
            subs = [self._custom(v) for v in values]
        self._scatter(subs, values, timestamps)

    def _custom(self, value: Any) -> int:
        key = self.key_selector.get_key(value)
        sub = self.partitioner.partition(key, self.parallelism)
        if not isinstance(sub, int) or not 0 <= sub < self.parallelism:
            raise ValueError(
                f"Partitioner {type(self.partitioner).__name__}.partition({key!r}, "
                f"{self.parallelism}) returned {sub!r}; it must be an int in "
                f"[0, {self.parallelism})"
            )
        return sub

    def _scatter(
        self, subs: list[int], values: list[Any], timestamps: list[int | None] | None
    ) -> None:
        by_sub: dict[int, list[int]] = {}
        for i, sub in enumerate(subs):
            by_sub.setdefault(sub, []).append(i)
        if len(by_sub) == 1:
            self._add(subs[0], values, timestamps)
            return
        for sub, idx in by_sub.items():
            vs = [values[i] for i in idx]
            ts = None if timestamps is None else [timestamps[i] for i in idx]
            self._add(sub, vs, ts)

    def _subtasks(self, keys: list[Any]) -> list[int]:
        """The target subtask of each key: vectorised for int keys, memoised otherwise."""
        maxp, p = self.max_parallelism, self.parallelism
        key_group = self.key_group_assigner.key_group
        kgs = self.key_group_assigner.int64_key_groups(keys, maxp)
        if kgs is not None:
            return ((kgs.astype(np.int64) * p) // maxp).tolist()  # type: ignore[no-any-return]
        cache = self._cache
        out = []
        for k in keys:
            try:
                ck = (k.__class__, k)
                sub = cache.get(ck)
                if sub is None:
                    sub = cache[ck] = key_group(k, maxp) * p // maxp
            except TypeError:  # unhashable key: no memo
                sub = key_group(k, maxp) * p // maxp
            out.append(sub)
        return out

    def _add(self, sub: int, values: list[Any], timestamps: list[int | None] | None) -> None:
        group = self.groups.get(sub)
        if group is None:
            group = self.groups[sub] = ([], [] if timestamps is not None else None)
        gv, gt = group
        if gt is None and timestamps is not None:
            gt = [None] * len(gv)
            self.groups[sub] = (gv, gt)
        gv.extend(values)
        if gt is not None:
            gt.extend(timestamps if timestamps is not None else [None] * len(values))
        if len(gv) >= GROUP_TARGET:
            self._flush(sub)

    def _flush(self, sub: int) -> None:
        gv, gt = self.groups.pop(sub)
        if gv:
            payload = (self.route.input_index, encode_data(gv, gt))
            self.out.append((self.route.offset + sub, KIND_DATA, payload))

    def end_epoch(self) -> None:
        for sub in list(self.groups):
            self._flush(sub)
