"""The fit behind sparkpoint.epoch.target-duration: fixed cost and cost per record from
recent epochs, a probe when epochs are all alike, nothing sized when the fixed cost alone
reaches the target."""

from __future__ import annotations

from sparkpoint.runtime.driver.epoch_sizing import EpochCosts


def test_the_fit_separates_fixed_cost_from_cost_per_record() -> None:
    costs = EpochCosts(target_ms=250)
    for records, took in [(10_000, 150), (30_000, 350), (20_000, 250), (0, 900)]:
        costs.observe(records, took)  # an empty epoch is not fitted
    assert costs.fixed_ms is not None and abs(costs.fixed_ms - 50) < 1e-6
    assert costs.ms_per_record is not None and abs(costs.ms_per_record - 0.01) < 1e-9
    assert costs.records_within_target() == 20_000
    assert costs.probe_records() is None


def test_alike_epochs_probe_once_they_run_over_twice_the_target() -> None:
    costs = EpochCosts(target_ms=250)
    costs.observe(1_000, 90)
    costs.observe(1_050, 95)
    assert costs.records_within_target() is None  # too alike to fit
    assert costs.probe_records() is None  # short epochs: sizing would not pay
    costs.observe(40_000, 800)
    assert costs.probe_records() is None  # 1,000 against 40,000: fitted
    alike = EpochCosts(target_ms=250)
    alike.observe(40_000, 800)
    alike.observe(41_000, 820)
    assert alike.records_within_target() is None
    assert alike.probe_records() == 20_500


def test_nothing_is_sized_when_the_fixed_cost_reaches_the_target() -> None:
    costs = EpochCosts(target_ms=250)
    for records, took in [(1_000, 340), (500, 330), (1_000, 345)]:
        costs.observe(records, took)
    assert costs.fixed_ms is not None and costs.fixed_ms > 250
    assert costs.records_within_target() is None
    assert costs.probe_records() is None  # the fit stands: no probe either
    noisy = EpochCosts(target_ms=250)
    for records, took in [(1_000, 400), (2_000, 300)]:  # more records, less time
        noisy.observe(records, took)
    assert noisy.ms_per_record == 0.0
    assert noisy.records_within_target() is None
