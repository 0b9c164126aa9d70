"""Kafka's authentication and authorization failures as permanent errors naming what is
missing: the ACL (operation and resource, as ``kafka-acls.sh`` names them) a request needs,
or the credentials/certificates the cluster refused. No retry or restart can fix these, so
they end the job at once instead of after minutes of retries (``docs/kafka-sink.md``,
"ACLs")."""

from __future__ import annotations

from typing import Any

from sparkpoint.errors import KafkaAccessError

__all__ = [
    "KafkaAccessError",
    "denied",
    "librdkafka_denied",
    "needed_acl",
]

# Kafka's error codes of a refused principal (the same in both clients), and the resource type.
_RESOURCES = {
    29: "Topic",
    30: "Group",
    31: "Cluster",
    53: "TransactionalId",
    65: "DelegationToken",
}
_AUTHENTICATION = {58: "SASL_AUTHENTICATION_FAILED"}


def needed_acl(request: str, code: int, resource: str) -> str:
    """The ACL ``request`` needs that a refusal with Kafka error ``code`` on ``resource``
    points at, in ``kafka-acls.sh``'s words."""
    kind = _RESOURCES.get(code, "resource")
    if kind == "Cluster":
        if request == "WriteTxnMarkers":
            return "ClusterAction on the Cluster"
        if request in ("InitProducerId", "Produce"):
            return "IdempotentWrite on the Cluster (or Write on the transactional id)"
        return "Describe on the Cluster"
    operation = {
        ("Topic", "Produce"): "Write",
        ("Topic", "Fetch"): "Read",
        ("Topic", "DescribeProducers"): "Read",
        ("Topic", "OffsetCommit"): "Read",
        ("Topic", "Metadata"): "Describe",
        ("Group", "OffsetCommit"): "Read",
        ("Group", "OffsetFetch"): "Describe",
        ("TransactionalId", "DescribeTransactions"): "Describe",
        ("TransactionalId", "ListTransactions"): "Describe",
    }.get((kind, request), "Write" if kind == "TransactionalId" else "Read")
    return f"{operation} on {kind} {resource!r}"


def denied(request: str, code: int, resource: str, name: str) -> KafkaAccessError | None:
    """A ``KafkaAccessError`` when Kafka error ``code`` (named ``name``) refused the
    principal ``request`` on ``resource``; None for any other error."""
    if code in _AUTHENTICATION:
        return KafkaAccessError(
            f"Kafka refused the client's credentials ({name}) for {request}: check "
            "sasl.jaas.config (or sasl.username/sasl.password) and sasl.mechanism"
        )
    if code not in _RESOURCES:
        return None
    return KafkaAccessError(
        f"Kafka refused {request} for {resource!r} ({name}): the job's principal needs the "
        f"ACL {needed_acl(request, code, resource)}"
    )


def librdkafka_denied(error: Any, request: str, resource: str) -> KafkaAccessError | None:
    """``denied`` for a confluent-kafka ``KafkaError`` (or an exception carrying one), with
    librdkafka's local authentication and TLS failures too."""
    err = error.args[0] if isinstance(error, Exception) and error.args else error
    code = getattr(err, "code", None)
    if not callable(code):
        return None
    from confluent_kafka import KafkaError

    c = code()
    if c == KafkaError._AUTHENTICATION:
        return KafkaAccessError(
            f"Kafka refused the client's credentials for {request}: {err.str()} (check "
            "sasl.jaas.config or sasl.username/sasl.password, and sasl.mechanism)"
        )
    if c == KafkaError._SSL:
        return KafkaAccessError(
            f"TLS to Kafka failed for {request}: {err.str()} (check ssl.truststore.* or "
            "ssl.ca.location, and ssl.endpoint.identification.algorithm)"
        )
    return denied(request, c, resource, err.name())
