"""The ``typed`` case: the keyed count without checkpoints, its map declared
``output_type=Types.TUPLE([Types.LONG(), Types.LONG()])``, alternated three times with the
untyped (pickled) run: the median of each."""

from __future__ import annotations

import os
from typing import Any

from keyed_count.harness import emit
from keyed_count.job import run_sparkpoint


def run(spark: Any, args: Any, work: str) -> None:
    """Emit one ``typed_records`` line per ``--keys`` value and backend."""
    from sparkpoint.common.typeinfo import Types

    pair = Types.TUPLE([Types.LONG(), Types.LONG()])
    for keys in args.keys:
        for backend in args.backends:
            # alternated three times (the machine is shared): the median of each
            rates: dict[str, list[int]] = {"untyped": [], "typed": []}
            exact = True
            for _ in range(3):
                for name, out_type in (("untyped", None), ("typed", pair)):
                    r = run_sparkpoint(
                        spark,
                        args.events,
                        keys,
                        backend,
                        False,
                        os.path.join(work, "typed"),
                        args.records_per_split,
                        output_type=out_type,
                    )
                    rates[name].append(r["events_per_s"])
                    exact = exact and r["exact"]
            median = {name: sorted(v)[1] for name, v in rates.items()}
            emit(
                {
                    "bench": "typed_records",
                    "backend": backend,
                    "events": args.events,
                    "keys": keys,
                    "exact": exact,
                    **{f"{name}_events_per_s": m for name, m in median.items()},
                    **{f"{name}_runs": v for name, v in rates.items()},
                    "typed_over_untyped": round(median["typed"] / median["untyped"], 3),
                }
            )
