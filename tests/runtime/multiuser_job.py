"""A small keyed job run as its own driver process by test_local_dirs_hosts.py, possibly as
another user: prints the job's records as one JSON line."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

N_EVENTS = 600
N_KEYS = 7


def expected() -> list[list[int]]:
    """Each key's running sums, as the job must emit them (sorted)."""
    sums: dict[int, int] = {}
    out = []
    for x in range(N_EVENTS):
        k = x % N_KEYS
        sums[k] = sums.get(k, 0) + x
        out.append([k, sums[k]])
    return sorted(out)


def main() -> None:
    local_state = sys.argv[1]
    from sparkpoint.common import Configuration, Types
    from sparkpoint.datastream import StreamExecutionEnvironment
    from sparkpoint.runtime.spark.session import get_spark_session

    conf = Configuration()
    conf.set_string("sparkpoint.local-state.dir", local_state)
    conf.set_string("sparkpoint.epoch.max-records-per-split", "100")
    env = StreamExecutionEnvironment.get_execution_environment(
        conf, spark=get_spark_session("local[2]")
    )
    env.set_parallelism(2)
    env.enable_checkpointing(10)
    pair = Types.TUPLE([Types.INT(), Types.LONG()])
    records = (
        env.from_collection([(x % N_KEYS, x) for x in range(N_EVENTS)], type_info=pair)
        .key_by(lambda p: p[0], key_type=Types.INT())
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .execute_and_collect("multiuser", limit=N_EVENTS + 1)
    )
    print("RESULT " + json.dumps(sorted([int(k), int(s)] for k, s in records)), flush=True)


if __name__ == "__main__":
    main()
