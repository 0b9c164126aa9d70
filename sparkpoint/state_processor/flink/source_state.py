"""Source positions of a Flink savepoint as a sparkpoint savepoint records them: the job
master state (``sparkpoint.job``, JSON in ``_metadata``) holds per source operator id (its
uid) the splits its enumerator restores, which the source checks again on restore.

Only Kafka sources' splits are carried (``kafka_splits``); the state of Flink's sinks is
not (see docs/flink-migration.md: a KafkaSink's transactions are Flink's, committed when
``flink stop`` ends the job).
"""

from __future__ import annotations

from collections.abc import Sequence

from sparkpoint.checkpoint.metadata import MasterState
from sparkpoint.checkpoint.trust import default_trust
from sparkpoint.state_processor.flink.kafka_splits import read_kafka_splits
from sparkpoint.state_processor.flink.metadata import FlinkMetadata

__all__ = ["JOB_MASTER_STATE_NAME", "kafka_source_state"]

JOB_MASTER_STATE_NAME = "sparkpoint.job"  # runtime.driver.master_state's (tested equal)


def kafka_source_state(
    metadata: FlinkMetadata, uids: Sequence[str], job_name: str | None, what: str
) -> tuple[MasterState, ...]:
    """The job master state holding the splits of the Kafka sources ``uids`` (none when
    ``uids`` is empty). ``job_name`` is required when a signing key is configured: a
    signed savepoint restores only into the job of the name it records."""
    if not uids:
        return ()
    if len(set(uids)) != len(uids):
        raise ValueError(f"Kafka source uids {list(uids)} name one twice")
    if job_name is None and default_trust().signing_key is not None:
        raise ValueError(
            "A signing key is configured, and a signed savepoint restores only into the job "
            "whose name it records: pass the sparkpoint job's name (job_name=..., "
            "--job-name) to import source offsets"
        )
    sources = {
        uid: [split.to_sparkpoint() for split in read_kafka_splits(metadata, uid, what)]
        for uid in uids
    }
    return (
        MasterState.from_json(
            JOB_MASTER_STATE_NAME,
            {
                "job_id": f"flink-savepoint-{metadata.checkpoint_id}",
                "job_name": job_name or "",
                "epoch": 0,
                "sources": sources,
                "watermarks": {},
                "generators": {},
                "pending_sink_commits": [],
            },
        ),
    )
