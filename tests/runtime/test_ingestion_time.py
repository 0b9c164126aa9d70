"""``TimeCharacteristic.IngestionTime``: records are stamped with processing time at the
source (the epoch's time, read on the driver), and the watermark follows processing time in
steps of the auto-watermark interval, as Flink's ingestion-time sources did."""

from __future__ import annotations

from typing import Any

from sparkpoint.common import Configuration, WatermarkStrategy
from sparkpoint.datastream import ProcessFunction, StreamExecutionEnvironment, TimeCharacteristic
from sparkpoint.testing import Faults, ManualClock


class Stamps(ProcessFunction):
    """Emits each record with its timestamp and the watermark the operator has seen."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield value, ctx.timestamp(), ctx.timer_service().current_watermark()


def _run(env: StreamExecutionEnvironment, stream_of: Any) -> list[Any]:
    env.set_parallelism(1)
    env.configure(Configuration().set_string("sparkpoint.epoch.max-records-per-split", "1"))
    clock = ManualClock(1_000_000)
    env.set_clock(clock)
    # Epoch e runs at processing time 1_000_000 + 150 e.
    env.set_fault_injection(Faults().on_epoch_start(lambda event: clock.advance(150)))
    env.set_stream_time_characteristic(TimeCharacteristic.IngestionTime)
    env.get_config().set_auto_watermark_interval(100)
    return list(stream_of(env).process(Stamps()).execute_and_collect())


def test_records_are_stamped_at_the_source(env: StreamExecutionEnvironment) -> None:
    out = _run(env, lambda e: e.from_collection(["a", "b", "c"]))
    # Record i is read in epoch i + 1 (one record per epoch); the watermark an epoch sees is
    # the previous epoch's time aligned down to the 100 ms interval, and always below that
    # time (1_000_300 is aligned already: 1_000_299).
    assert out == [
        ("a", 1_000_150, -(2**63)),
        ("b", 1_000_300, 1_000_100),
        ("c", 1_000_450, 1_000_299),
    ]


def test_a_typed_source_is_converted_and_stamped(env: StreamExecutionEnvironment) -> None:
    from sparkpoint.common import Row, Types

    row_type = Types.ROW_NAMED(["id", "weight"], [Types.INT(), Types.FLOAT()])
    out = _run(env, lambda e: e.from_collection([(1, 0.1)], type_info=row_type))
    [(row, ts, _)] = out
    assert isinstance(row, Row) and row.id == 1 and row.weight == 0.10000000149011612
    assert ts == 1_000_150


def test_program_timestamps_win(env: StreamExecutionEnvironment) -> None:
    """A source the program gives timestamps keeps them (the program's strategy decides)."""
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda v, _ts: v * 10
    )
    out = _run(
        env, lambda e: e.from_collection([1, 2, 3]).assign_timestamps_and_watermarks(strategy)
    )
    assert [(v, ts) for v, ts, _wm in out] == [(1, 10), (2, 20), (3, 30)]


def test_other_characteristics_leave_records_unstamped(env: StreamExecutionEnvironment) -> None:
    env.set_parallelism(1)
    env.set_stream_time_characteristic(TimeCharacteristic.IngestionTime)
    stream = env.from_collection(["a"])
    env.set_stream_time_characteristic(TimeCharacteristic.EventTime)  # decided at execute()
    assert list(stream.process(Stamps()).execute_and_collect()) == [("a", None, -(2**63))]
