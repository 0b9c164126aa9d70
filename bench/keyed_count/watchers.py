"""What the ``large`` case watches while its job runs: the Python workers' peak memory and
the files written under the checkpoint directory (a finished job deletes its checkpoints)."""

from __future__ import annotations

import os
import time


class RssSampler:
    """Peak resident memory of this machine's Spark Python workers (sampled from /proc)."""

    def __init__(self) -> None:
        import threading

        self.peak_worker = 0
        self.peak_workers_total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.wait(0.5):
            total = 0
            for pid in os.listdir("/proc"):
                if not pid.isdigit() or int(pid) == me:
                    continue
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read()
                    if b"pyspark.daemon" not in cmd and b"pyspark/worker" not in cmd:
                        continue
                    with open(f"/proc/{pid}/statm") as f:
                        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
                except (OSError, ValueError, IndexError):
                    continue
                total += rss
                self.peak_worker = max(self.peak_worker, rss)
            self.peak_workers_total = max(self.peak_workers_total, total)

    def stop(self) -> dict[str, int]:
        """Stop sampling; the peaks seen (bytes)."""
        self._stop.set()
        self._thread.join()
        return {
            "peak_rss_python_worker_bytes": self.peak_worker,
            "peak_rss_python_workers_total_bytes": self.peak_workers_total,
        }


class CheckpointFiles:
    """Every file seen under a checkpoint directory while the job runs (a finished job
    deletes its checkpoints), polled once a second: path -> (size, mtime). The ``shared/``
    directories are also polled every 0.2 s for how much their files grew (``growth``:
    time, bytes), which places a file written slowly (a background materialization at a
    bounded rate) in the checkpoint intervals it was written in, not only the last."""

    def __init__(self, root: str) -> None:
        import threading

        self.root = root
        self.files: dict[str, tuple[int, float]] = {}
        self.growth: list[tuple[float, int]] = []
        self._sizes: dict[str, int] = {}
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, daemon=True),
            threading.Thread(target=self._run_shared, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _poll_shared(self) -> None:
        now = time.time()
        try:
            jobs = os.listdir(self.root)
        except OSError:
            return
        for job in jobs:
            try:
                entries = list(os.scandir(os.path.join(self.root, job, "shared")))
            except OSError:
                continue
            for entry in entries:
                try:
                    size = entry.stat().st_size
                except OSError:
                    continue
                grew = size - self._sizes.get(entry.path, 0)
                if grew > 0:
                    self.growth.append((now, grew))
                    self._sizes[entry.path] = size

    def _run_shared(self) -> None:
        while not self._stop.wait(0.2):
            self._poll_shared()

    def _poll(self) -> None:
        for dirpath, _dirs, names in os.walk(self.root):
            for name in names:
                path = os.path.join(dirpath, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                self.files[path] = (st.st_size, st.st_mtime)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self._poll()

    def stop(self) -> None:
        """Stop polling (the files seen so far stay)."""
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def uploaded_per_checkpoint(self) -> list[tuple[int, int, int, int]]:
        """What was written for each checkpoint: its own ``chk-N`` files, the
        ``taskowned/`` (changelog entries) and ``shared/`` files first written after the
        previous checkpoint's ``_metadata`` and before its own (every checkpoint is
        retained), and the growth of ``shared/`` files seen in that time."""
        chks: list[tuple[float, str]] = []
        written: dict[str, list[tuple[float, int]]] = {"shared": [], "taskowned": []}
        own: dict[str, int] = {}
        for path, (size, mtime) in self.files.items():
            parent = os.path.dirname(path)
            if os.path.basename(parent).startswith("chk-"):
                own[parent] = own.get(parent, 0) + size
                if os.path.basename(path) == "_metadata":
                    chks.append((mtime, parent))
            else:
                for kind, files in written.items():
                    if os.sep + kind in parent:
                        files.append((mtime, size))
        chks.sort()
        out: list[tuple[int, int, int, int]] = []
        prev = float("-inf")
        for mtime, parent in chks:
            entries, shared = (
                sum(size for t, size in written[kind] if prev < t <= mtime)
                for kind in ("taskowned", "shared")
            )
            grew = sum(size for t, size in self.growth if prev < t <= mtime)
            out.append((own[parent], entries, shared, grew))
            prev = mtime
        return out
