"""Which transaction protocol (KIP-890's v1 or v2) the sink's transactions run under on the
test broker: the broker's finalized ``transaction.version``, and the producer epoch a
transaction of librdkafka's leaves after its commit (v2 bumps it per transaction; v1 keeps
it, which the commit redo, POOLING and the hanging-transaction rule rely on).
``TransactionAdmin.transaction_version`` reads the first; the sink refuses a commit that
shows the second (``kafka_sink``)."""

from __future__ import annotations

import time

from confluent_kafka import Producer

from sparkpoint.connectors.kafka_transactions import OpenTransaction, TransactionAdmin
from tests.fixtures.kafka import KafkaBroker


def test_librdkafkas_transactions_run_under_protocol_v1(kafka_broker: KafkaBroker) -> None:
    topic = "txn-version"
    kafka_broker.create_topic(topic, 1)
    admin = TransactionAdmin(kafka_broker.bootstrap_servers)
    try:
        finalized = admin.transaction_version()
        epochs = []
        for commit_by in ("producer", "driver"):
            tid = f"txn-version-{commit_by}"
            p = Producer(
                {"bootstrap.servers": kafka_broker.bootstrap_servers, "transactional.id": tid}
            )
            p.init_transactions(30)
            p.begin_transaction()
            p.produce(topic, b"x")
            assert p.flush(30) == 0
            before = admin.describe(tid)
            assert before.state == "Ongoing"
            if commit_by == "producer":
                p.commit_transaction(30)
            else:
                assert admin.end(before, commit=True) is None
            after = admin.describe(tid)
            deadline = time.monotonic() + 30
            while after.state == "PrepareCommit" and time.monotonic() < deadline:
                time.sleep(0.05)  # the coordinator writes the markers, then completes
                after = admin.describe(tid)
            assert (after.state, after.producer_id) == ("CompleteCommit", before.producer_id)
            epochs.append((before.producer_epoch, after.producer_epoch))
            # A second commit of the same transaction (a restore's redo) is a no-op.
            redo = OpenTransaction(tid, before.producer_id, before.producer_epoch, "Ongoing")
            assert admin.end(redo, commit=True) is None
        print(f"broker's finalized transaction.version: {finalized}; epochs {epochs}")
        # Kafka 4.4 finalizes transaction.version 2 on a new cluster; librdkafka 2.16 still
        # speaks v1 (no epoch bump at the commit), so the sink's transactions are v1's.
        assert finalized == 2
        assert all(b == a for b, a in epochs), epochs
    finally:
        admin.close()
