"""The demo's terminal: a progress bar line per tenth when not on a terminal, and a log
file that takes what the process (and its children, such as Spark's JVM) write to fds 1/2."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from sparkpoint.demo_console import Progress


def test_progress_without_a_terminal_prints_a_line_per_tenth() -> None:
    out = io.StringIO()
    progress = Progress(out, 1000)
    for done in range(0, 1001, 50):
        progress.update(done, f"epoch {done // 100}")
    progress.event("  !! something happened")
    progress.finish(1000, "epoch 11")
    lines = out.getvalue().splitlines()
    assert len(lines) == 11 + 1 + 1
    assert lines[0].startswith("[------------------------------]   0%  0/1,000 records")
    assert lines[5].startswith("[###############---------------]  50%  500/1,000 records")
    assert lines[10].endswith("epoch 10") and lines[11] == "  !! something happened"
    assert lines[12] == "[##############################] 100%  1,000/1,000 records  epoch 11"


def test_terminal_log_sends_fds_1_and_2_of_the_process_and_its_children_to_the_file(
    tmp_path: Path,
) -> None:
    log = tmp_path / "demo.log"
    script = f"""
import os, subprocess, sys
from sparkpoint.demo_console import TerminalLog
t = TerminalLog({str(log)!r})
print("python stdout"); print("python stderr", file=sys.stderr)
subprocess.run(["sh", "-c", "echo child stdout; echo child stderr >&2"], check=True)
print("to the terminal", file=t.out)
t.restore()
print("after restore")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines() == ["to the terminal", "after restore"]
    assert done.stderr == ""
    assert sorted(log.read_text().splitlines()) == [
        "child stderr",
        "child stdout",
        "python stderr",
        "python stdout",
    ]
