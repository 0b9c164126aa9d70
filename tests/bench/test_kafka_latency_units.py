"""The Kafka benchmark's pure parts: the ``max`` rounds' sizing, the Markdown table made from
a run's JSON lines, Flink's checkpoint lines read from its log, PyFlink's settings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench.kafka_latency.__main__ import flink_checkpoints
from bench.kafka_latency.datastream_job import pyflink_settings
from bench.kafka_latency.phases import next_round
from bench.kafka_latency.report import read_json_lines, table


def _round(seconds: float, rate: int, drained: bool = True) -> dict:
    return {"seconds": seconds, "records_per_s": rate, "drained": drained}


def test_max_rounds_grow_to_half_the_target_then_stop() -> None:
    # 20,000 out in 2 s (10,000/s): the next round is 20 s of that rate.
    assert next_round(20_000, _round(2.0, 10_000), 20, 1_000_000) == 200_000
    # A slow rate still at least doubles the round.
    assert next_round(20_000, _round(9.0, 2_000), 20, 1_000_000) == 40_000
    assert next_round(20_000, _round(10.0, 2_000), 20, 1_000_000) is None
    assert next_round(20_000, _round(3.0, 1_000, drained=False), 20, 1_000_000) is None
    assert next_round(500_000, _round(1.0, 900_000), 20, 1_000_000) == 1_000_000
    assert next_round(1_000_000, _round(1.0, 900_000), 20, 1_000_000) is None


def _row(phase: str, **fields: object) -> str:
    base = {"engine": "pyflink", "label": "PyFlink", "guarantee": "exactly-once"}
    return json.dumps({**base, "phase": phase, **fields})


def test_markdown_table_from_json_lines() -> None:
    paced = {"sent": 30_000, "records_per_s": 1000, "latency_ms_mean": 1.0}
    lines = [
        "some log line",
        json.dumps({"run": "start", "date": "D", "commit": "c0ffee", "argv": ["--rate", "1000"]}),
        _row("warmup", first_output_s=9.0, all_out_s=12.0),
        _row(
            "max",
            records=200_000,
            out=200_000,
            seconds=16.0,
            records_per_s=12_500,
            cpu_s_per_M=150.4,
            writer_bound=False,
        ),
        _row(
            "sustained",
            rate=1000,
            received=30_000,
            sustained=True,
            latency_ms_p50=1250.0,
            latency_ms_p99=2500.0,
            cpu_s_per_M=700.0,
            **paced,
        ),
        _row(
            "near_max",
            rate=10_000,
            received=20_000,
            sustained=False,
            latency_ms_p50=None,
            latency_ms_p99=None,
            cpu_s_per_M=99.6,
            **paced,
        ),
        json.dumps(
            {
                "engine": "spark-rtm",
                "label": "RTM",
                "guarantee": "at-least-once",
                "phase": "warmup",
                "error": "engine exited 1",
            }
        ),
    ]
    lines.append(
        json.dumps(
            {
                "engine": "slow",
                "label": "Slow",
                "guarantee": "exactly-once",
                "phase": "max",
                "records": 5_000,
                "out": 4_000,
                "seconds": 40.0,
                "records_per_s": 100,
                "cpu_s_per_M": 7000.0,
            }
        )
    )
    lines.append(
        json.dumps(
            {
                "engine": "slow",
                "phase": "sustained",
                "rate": 1000,
                "error": "not run: 1,000 records of the earlier phases not out yet",
            }
        )
    )
    out = table(read_json_lines(lines)).splitlines()
    assert out[0] == "Run of D (c0ffee): `python -m bench.kafka_latency --rate 1000`"
    assert "sustained 1,000/s" in out[2]
    assert out[4] == (
        "| PyFlink | exactly-once | 12,500 (200,000 in 16.0 s; 150) | 1.25 s / 2.50 s (700) "
        "| 10,000/s → **not sustained**: 20,000 of 30,000 out (latency of those n/a / n/a) "
        "(100) |"
    )
    assert out[5] == "| RTM | at-least-once | not measured: engine exited 1 |  |  |"
    assert out[6] == (
        "| Slow | exactly-once | 100 (5,000 in 40.0 s, 4,000 out; 7,000) "
        "| not run: 1,000 records of the earlier phases not out yet | not run |"
    )
    assert len(out) == 7


def test_flink_checkpoints_read_from_both_log_formats(tmp_path: Path) -> None:
    (tmp_path / "flink-python.log").write_text(
        "x Completed checkpoint 1 for job ab12 (1000 bytes, checkpointDuration=300 ms, "
        "finalizationTime=2 ms).\n"
        "y Completed checkpoint 2 for job ab12 (5000 bytes in 900 ms).\n"
        "z Completed checkpoint 3 for job ab12 (3000 bytes, checkpointDuration=100 ms, "
        "finalizationTime=1 ms).\n"
        "Triggering checkpoint 4\n"
    )
    assert flink_checkpoints(str(tmp_path)) == {
        "checkpoints": 3,
        "checkpoint_ms_p50": 300.0,
        "checkpoint_ms_max": 900.0,
        "checkpoint_bytes_max": 5000,
    }


def test_pyflink_settings_take_overrides_and_refuse_a_bare_key() -> None:
    settings = pyflink_settings("process", ["python.fn-execution.bundle.size=1000"])
    assert settings["python.execution-mode"] == "process"
    assert settings["python.fn-execution.bundle.size"] == "1000"
    with pytest.raises(SystemExit, match=re.escape("key=value, got 'python.state.cache-size'")):
        pyflink_settings("thread", ["python.state.cache-size"])


def test_protocol_rows_and_cost() -> None:
    from bench.kafka_latency.__main__ import protocol_cost

    plain = {"engine": "sparkpoint", "label": "sparkpoint", "guarantee": "exactly-once"}
    secured = {**plain, "protocol": "SASL_SSL"}
    max_row = {"out": 100, "records": 100, "seconds": 1.0, "cpu_s_per_M": 1.0}
    rows = [
        {**plain, "phase": "warmup"},
        {**plain, "phase": "max", **max_row, "records_per_s": 10_000},
        {**secured, "phase": "warmup"},
        {**secured, "phase": "max", **max_row, "records_per_s": 8_000},
        {"engine": "pyflink", "phase": "max", "error": "no output"},
    ]
    assert protocol_cost(rows) == {
        "sparkpoint": {"PLAINTEXT": 10_000, "SASL_SSL": 8_000, "ratio": 0.8}
    }
    lines = table(rows).splitlines()
    assert [line.split(" | ")[0] for line in lines[2:]] == [
        "| sparkpoint",
        "| sparkpoint over SASL_SSL",
        "| pyflink",
    ]
    assert lines[2].split(" | ")[2].startswith("10,000 (100 in 1.0 s;")
    assert lines[3].split(" | ")[2].startswith("8,000 (100 in 1.0 s;")
