"""sparkpoint's own end-to-end latency gauges, read from the job's REST API while the benchmark
runs: ``sparkpoint.lastCommitRecordLatencyMean/Max`` of every commit that published records
(the driver's clock at the commit minus each record's Kafka timestamp), shown beside the
latency the benchmark's consumer measures."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from typing import Any

__all__ = ["CommitLatencyGauges", "free_port"]

_MEAN = "sparkpoint.lastCommitRecordLatencyMean"
_MAX = "sparkpoint.lastCommitRecordLatencyMax"
_POLL_S = 0.5  # a commit a second at the default checkpoints: each seen, the driver ~undisturbed
_TIMEOUT_S = 2.0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as response:
        return json.loads(response.read())


class CommitLatencyGauges:
    """Polls the job at ``base_url`` (its REST API) in a thread and keeps one sample per
    commit: (time, mean ms, max ms), a new sample whenever the gauges change."""

    def __init__(self, base_url: str) -> None:
        self._base = base_url.rstrip("/")
        self._samples: list[tuple[float, float, float]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True, name="job-gauges")
        self._thread.start()

    def _poll(self) -> None:
        job: str | None = None
        last: tuple[float, float] | None = None
        while not self._stop.wait(_POLL_S):
            try:
                if job is None:
                    jobs = _get(f"{self._base}/jobs").get("jobs", [])
                    if not jobs:
                        continue
                    job = str(jobs[0]["id"])
                got = _get(f"{self._base}/jobs/{job}/metrics?get={_MEAN},{_MAX}")
            except (OSError, ValueError):
                continue  # the job is not serving yet, or is stopping
            values = {item["id"]: float(item["value"]) for item in got}
            now = (values.get(_MEAN, -1.0), values.get(_MAX, -1.0))
            if now[0] >= 0 and now != last:
                last = now
                with self._lock:
                    self._samples.append((time.time(), now[0], now[1]))

    def window(self, lo_s: float, hi_s: float) -> dict[str, Any]:
        """The commits sampled in [lo_s, hi_s]: their count, the mean of their mean
        latencies and the largest maximum (ms); empty when none was sampled."""
        with self._lock:
            inside = [s for s in self._samples if lo_s <= s[0] <= hi_s]
        if not inside:
            return {}
        return {
            "gauge_commits": len(inside),
            "gauge_latency_ms_mean": round(sum(s[1] for s in inside) / len(inside), 1),
            "gauge_latency_ms_max": round(max(s[2] for s in inside), 1),
        }

    def stop(self) -> None:
        """Stop polling."""
        self._stop.set()
        self._thread.join(_TIMEOUT_S * 2)
