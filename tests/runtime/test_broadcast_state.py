"""Broadcast state (``broadcast(descriptor)``, (Keyed)BroadcastProcessFunction): exact
results under injected failures, and savepoint -> restore at another parallelism with every
new subtask taking one copy of the broadcast state (``tests/runtime/jobs/broadcast_jobs.py``)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from sparkpoint.common import Configuration, RestartStrategies, Types
from sparkpoint.datastream import (
    FileSystemCheckpointStorage,
    KeyedBroadcastProcessFunction,
    StreamExecutionEnvironment,
)
from sparkpoint.datastream.state import MapStateDescriptor, ValueStateDescriptor
from sparkpoint.testing import FailureInjector, Faults
from tests.runtime.jobs.broadcast_jobs import (
    KeyedRules,
    PlainRules,
    broadcast_job,
    expected_audit,
    expected_finals,
)
from tests.runtime.jobs.reference import read_sink

N_EVENTS = 3000
N_RULES = 1200
N_KEYS = 11


def _env(
    spark: Any, tmp_path: Any, parallelism: int, restore: str | None = None, split: int = 300
) -> Any:
    conf = Configuration()
    conf.set_string("sparkpoint.epoch.max-records-per-split", str(split))
    conf.set_string("sparkpoint.local-state.dir", str(tmp_path / "local"))
    if restore is not None:
        conf.set_string("execution.savepoint.path", restore)
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(parallelism)
    env.enable_checkpointing(10)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage(str(tmp_path / "ckpt"), savepoint_path=str(tmp_path / "sp"))
    )
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    return env


def _check(
    out_dir: str, parallelism: int, keyed: bool, n_events: int = N_EVENTS, n_rules: int = N_RULES
) -> None:
    out = read_sink(out_dir)
    if keyed:
        recs = sorted(o for o in out if o[0] == "rec")
        assert recs == sorted(("rec", x % N_KEYS, x) for x in range(n_events))
        finals = [o for o in out if o[0] == "final"]
        assert len(finals) == N_KEYS
        assert {o[1]: (o[2], o[3], o[4]) for o in finals} == expected_finals(
            n_events, N_KEYS, n_rules
        )
    else:
        assert sorted(out) == [("rec", x) for x in range(n_events)]
    assert sorted(read_sink(out_dir + "-audit")) == expected_audit(
        range(parallelism), range(n_rules)
    )


FAILURES = {
    # name: (function, injector at, times, mode, restarts)
    "rule-raise-spark-retry": ("rule", N_RULES // 2 + 3, 1, "raise", 0),
    "rule-raise-job-restore": ("rule", N_RULES // 2 + 3, 4, "raise", 1),
    "event-kill-job-restore": ("event", N_EVENTS // 2 + 5, 4, "kill", 1),
}


@pytest.mark.parametrize("failure", list(FAILURES))
def test_keyed_broadcast_exact_under_failures(spark: Any, tmp_path: Any, failure: str) -> None:
    """A user exception in process_broadcast_element (absorbed by Spark's retry, or by a
    restore from the latest checkpoint) or a killed Python worker in process_element: every
    subtask's broadcast state, the keyed state and both outputs stay exact."""
    on, at, times, mode, restarts = FAILURES[failure]
    inj = FailureInjector(str(tmp_path / "inj"), at, times=times, mode=mode)
    env = _env(spark, tmp_path, 2)
    out = str(tmp_path / "out")
    broadcast_job(env, out, N_EVENTS, N_RULES, N_KEYS, KeyedRules(inj, on))
    result = env.execute("broadcast-failures")
    assert inj.fired() == times
    assert result.restarts == restarts
    _check(out, 2, keyed=True)


def test_keyed_broadcast_failure_after_local_commit(spark: Any, tmp_path: Any) -> None:
    """The keyed broadcast task of subtask 1 fails after committing its keyed state for
    epoch 3, four times (Spark's retries exhausted): the job restores; exact."""
    marker = FailureInjector(str(tmp_path / "after-commit"), at_record=3, times=4)
    env = _env(spark, tmp_path, 2)
    env.set_fault_injection(Faults().fail_after_local_commit(marker, "bc", 1))
    out = str(tmp_path / "out")
    broadcast_job(env, out, N_EVENTS, N_RULES, N_KEYS, KeyedRules())
    result = env.execute("broadcast-after-commit")
    assert marker.fired() == 4
    assert result.restarts == 1
    _check(out, 2, keyed=True)


def test_broadcast_process_exact_after_job_restore(spark: Any, tmp_path: Any) -> None:
    """The non-keyed operator (no keyed state at all): a rule failing four times restores
    the job from the latest checkpoint, whose broadcast state every subtask restarts from."""
    inj = FailureInjector(str(tmp_path / "inj"), N_RULES // 2 + 3, times=4)
    env = _env(spark, tmp_path, 2)
    out = str(tmp_path / "out")
    broadcast_job(env, out, N_EVENTS, N_RULES, None, PlainRules(inj))
    result = env.execute("plain-broadcast-failures")
    assert inj.fired() == 4
    assert result.restarts == 1
    _check(out, 2, keyed=False)


def _stop_after(env: Any, epochs: int) -> str:
    client = env.execute_async("broadcast-savepoint")
    master = client.job_master
    while master.progress.epochs_run < epochs:
        assert not client.get_job_execution_result().done(), "job ended before the stop"
        time.sleep(0.05)
    path = client.stop_with_savepoint(False).result(timeout=120)
    client.wait(timeout=120)
    assert master.status == "FINISHED"
    return str(path)


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "non-keyed"])
@pytest.mark.parametrize("old_p,new_p", [(2, 3), (3, 1)])
def test_savepoint_restore_at_other_parallelism_keeps_broadcast_state(
    spark: Any, tmp_path: Any, old_p: int, new_p: int, keyed: bool
) -> None:
    """Stop with a savepoint mid-input, resume at another parallelism: every new subtask
    continues from one copy of the broadcast state (its running sum goes on where the
    savepoint left it), keyed state and timers continue, nothing is lost or repeated."""
    n_events, n_rules = 4 * N_EVENTS, 4 * N_RULES
    out = str(tmp_path / "out")
    fn = KeyedRules() if keyed else PlainRules()
    keys = N_KEYS if keyed else None
    env = _env(spark, tmp_path, old_p)
    broadcast_job(env, out, n_events, n_rules, keys, fn)
    sp = _stop_after(env, 3)
    audit = read_sink(out + "-audit")
    done = max(o[2] for o in audit) + 1  # rules the savepoint covers
    assert 0 < done < n_rules  # stopped mid-input
    assert sorted(audit) == expected_audit(range(old_p), range(done))

    # the rest of the input in a few large epochs (records per epoch are a driver setting)
    env = _env(spark, tmp_path, new_p, restore=sp, split=5_000)
    broadcast_job(env, out, n_events, n_rules, keys, fn)
    env.execute("broadcast-resumed")
    after = sorted(read_sink(out + "-audit"))
    assert after == sorted(
        expected_audit(range(old_p), range(done))
        + expected_audit(range(new_p), range(done, n_rules))
    )
    if keyed:
        out_rows = read_sink(out)
        assert sorted(o for o in out_rows if o[0] == "rec") == sorted(
            ("rec", x % N_KEYS, x) for x in range(n_events)
        )
        finals = {o[1]: (o[2], o[3], o[4]) for o in out_rows if o[0] == "final"}
        assert finals == expected_finals(n_events, N_KEYS, n_rules)
    else:
        assert sorted(read_sink(out)) == [("rec", x) for x in range(n_events)]


SEEN = MapStateDescriptor("seen", Types.STRING(), Types.INT())
COUNT = ValueStateDescriptor("count", Types.INT())


class Snapshotting(KeyedBroadcastProcessFunction):
    """Counts events per key; the rule "bump" adds 100 to every key's count through
    ``apply_to_keyed_state`` and reports the keys it saw; timers read the broadcast state."""

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(COUNT)

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.count.update((self.count.value() or 0) + 1)
        ctx.timer_service().register_event_time_timer(2**62)
        seen = ctx.get_broadcast_state(SEEN)
        assert not hasattr(seen, "put")  # read-only on the keyed side
        return None

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        ctx.get_broadcast_state(SEEN).put(
            value, (ctx.get_broadcast_state(SEEN).get(value) or 0) + 1
        )
        if value == "bump":
            keys: list[Any] = []

            def bump(key: Any, state: Any) -> None:
                keys.append(key)
                state.update(state.value() + 100)

            ctx.apply_to_keyed_state(COUNT, bump)
            yield ("bumped", sorted(keys))

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield (
            ctx.get_current_key(),
            self.count.value(),
            sorted(ctx.get_broadcast_state(SEEN).items()),
        )


def test_apply_to_keyed_state_and_broadcast_first_within_an_epoch(env: Any) -> None:
    """Two records per source split and epoch: epoch 1 brings events a, b and rules x, y;
    epoch 2 events c, a and the rules bump, x. Within an epoch the broadcast side is
    processed first, so "bump" sees the keys of epoch 1 only (a, b) and adds 100 to them."""
    env.set_parallelism(1)
    env.configure({"sparkpoint.epoch.max-records-per-split": "2"})
    events = env.from_collection(["a", "b", "c", "a"], type_info=Types.STRING())
    rules = env.from_collection(["x", "y", "bump", "x"], type_info=Types.STRING())
    out = (
        events.key_by(lambda e: e)
        .connect(rules.broadcast(SEEN))
        .process(Snapshotting())
        .execute_and_collect()
    )
    rows = list(out)
    seen = [("bump", 1), ("x", 2), ("y", 1)]
    assert rows[0] == ("bumped", ["a", "b"])
    # the timers fire together at the end: in key-group order, which Flink leaves open
    assert sorted(rows[1:]) == [("a", 102, seen), ("b", 101, seen), ("c", 1, seen)]
