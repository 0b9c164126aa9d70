"""Every system metric sparkpoint reports, with its scope, kind and meaning: the list
``docs/observing.md`` shows (``python -m sparkpoint.metrics.docs``)."""

from __future__ import annotations

from dataclasses import dataclass

from sparkpoint.metrics.sample import MetricKey, MetricKind

__all__ = ["JOB", "OPERATOR", "SYSTEM_METRICS", "SystemMetric", "key_of"]

OPERATOR = "operator"  # per operator and subtask: <job>.<operator>.<subtask>.<name>
JOB = "job"  # per job: <job>.<name>


@dataclass(frozen=True)
class SystemMetric:
    """One system metric: Flink's name (sparkpoint's own under the ``sparkpoint`` group)."""

    name: str
    scope: str
    kind: MetricKind
    description: str
    flink: bool = True


def key_of(name: str) -> MetricKey:
    """The key of a dotted system metric name (``sparkpoint.stateSize``: group, name)."""
    *groups, last = name.split(".")
    return MetricKey(tuple((g, None) for g in groups), last)


_C, _G, _M = MetricKind.COUNTER, MetricKind.GAUGE, MetricKind.METER

SYSTEM_METRICS: tuple[SystemMetric, ...] = (
    SystemMetric("numRecordsIn", OPERATOR, _C, "Records the operator received."),
    SystemMetric(
        "numRecordsOut", OPERATOR, _C, "Records the operator emitted (side outputs included)."
    ),
    SystemMetric(
        "numRecordsInPerSecond", OPERATOR, _M, "Records received per second over the last 60 s."
    ),
    SystemMetric(
        "numLateRecordsDropped", OPERATOR, _C, "Records a window operator dropped as too late."
    ),
    SystemMetric(
        "currentInputWatermark",
        OPERATOR,
        _G,
        "The watermark the operator's last epoch ended with (ms).",
    ),
    SystemMetric(
        "currentOutputWatermark",
        OPERATOR,
        _G,
        "The watermark the operator emitted last (ms): its generator's for a timestamp "
        "assigner, its input watermark for the others.",
    ),
    SystemMetric(
        "sparkpoint.stateSize",
        OPERATOR,
        _G,
        "Bytes of the subtask's state in the latest completed checkpoint.",
        flink=False,
    ),
    SystemMetric(
        "pendingRecords",
        OPERATOR,
        _G,
        "Records a source has yet to read, after the latest epoch (sources that can tell: "
        "Kafka, its end offsets less the positions), under subtask 0; per split as "
        "`split.<split id>.pendingRecords`.",
    ),
    SystemMetric(
        "sparkpoint.numRecordsSkipped",
        OPERATOR,
        _C,
        "Records a source skipped unread because its input no longer held them (Kafka with "
        "`sparkpoint.skip-deleted-records`: offsets below the log start), under subtask 0; "
        "per split as `split.<split id>.numRecordsSkipped`. Never counted in numRecordsIn.",
        flink=False,
    ),
    SystemMetric(
        "currentEmitEventTimeLag",
        OPERATOR,
        _G,
        "Per source subtask: when it emitted the latest record that carried a timestamp "
        "(Kafka's record timestamp), less that timestamp (ms; -1 while none did, as Flink's "
        "UNDEFINED). Measured when the source task handed the record's batch on, by the "
        "executor's clock against the producer's or broker's.",
    ),
    SystemMetric(
        "lastCheckpointDuration", JOB, _G, "Duration of the latest completed checkpoint (ms)."
    ),
    SystemMetric(
        "lastCheckpointSize",
        JOB,
        _G,
        "Bytes the latest completed checkpoint wrote (its checkpointed size: incremental "
        "checkpoints write less than the full state).",
    ),
    SystemMetric(
        "lastCheckpointFullSize",
        JOB,
        _G,
        "Full state size of the latest completed checkpoint (bytes).",
    ),
    SystemMetric("numberOfCompletedCheckpoints", JOB, _C, "Checkpoints and savepoints completed."),
    SystemMetric("numberOfFailedCheckpoints", JOB, _C, "Checkpoints and savepoints that failed."),
    SystemMetric("numberOfInProgressCheckpoints", JOB, _G, "Checkpoints under way."),
    SystemMetric("numRestarts", JOB, _C, "Whole-job restarts (failovers) so far."),
    SystemMetric("uptime", JOB, _G, "Milliseconds since the job started."),
    SystemMetric("sparkpoint.numEpochs", JOB, _C, "Epochs the job finished.", flink=False),
    SystemMetric(
        "sparkpoint.lastEpochDuration", JOB, _G, "Duration of the latest epoch (ms).", flink=False
    ),
    SystemMetric(
        "sparkpoint.lastCommitLatency",
        JOB,
        _G,
        "Milliseconds from the start of the newest epoch the latest sink commit published "
        "to that commit (-1 before the first): the end-to-end latency of a record that "
        "arrived just before that epoch started; one that arrived just after the previous "
        "committed epoch started waited up to the checkpoint interval more. Flink has no "
        "metric for it (its `latency` markers skip the sink's commit).",
        flink=False,
    ),
    SystemMetric(
        "sparkpoint.lastCommitRecordLatencyMax",
        JOB,
        _G,
        "End-to-end latency of the oldest record the latest publication made visible (ms, "
        "-1 before the first): the driver's wall clock when the sink commit covering the "
        "record's epoch completed (without a transactional sink: when the epoch ended and "
        "its sinks had flushed) less the record's source timestamp (Kafka's record "
        "timestamp; for sources without one, when the source task read it). Records of "
        "every epoch the publication covered count; a publication of no records leaves "
        "the figure as it was. Clocks differ across hosts: see Record latency below.",
        flink=False,
    ),
    SystemMetric(
        "sparkpoint.lastCommitRecordLatencyMean",
        JOB,
        _G,
        "The mean end-to-end latency of the records the latest publication made visible "
        "(ms, -1 before the first), as `sparkpoint.lastCommitRecordLatencyMax`.",
        flink=False,
    ),
    SystemMetric(
        "sparkpoint.lastCommitRecordLatencyMin",
        JOB,
        _G,
        "End-to-end latency of the newest record the latest publication made visible (ms, "
        "-1 before the first), as `sparkpoint.lastCommitRecordLatencyMax`.",
        flink=False,
    ),
    SystemMetric(
        "sparkpoint.subtaskRestores",
        JOB,
        _C,
        "Keyed subtasks that restored their state alone (the rest of the job went on).",
        flink=False,
    ),
    SystemMetric(
        "sparkpoint.tasksAwayFromExecutor",
        JOB,
        _G,
        "Keyed subtasks of the latest epoch that ran elsewhere than their placed executor.",
        flink=False,
    ),
)
