"""The keyed-count benchmark's parts: ``harness`` (sessions, warm-up, JSON lines, Spark
baselines), ``job`` (the keyed count every case runs) and one module per case.

``python bench/bench_keyed_count.py`` is the command; these modules are its pieces, also
used by ``bench_concurrent_jobs.py``. The repository root goes first on ``sys.path`` so the
checkout's sparkpoint is the one measured.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
