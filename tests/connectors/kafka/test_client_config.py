"""One Kafka client configuration for every connection (``kafka_client_config``): Java's
property names a PyFlink program sets become librdkafka's and kafka-python's, stores become
PEM files, untranslatable properties are refused by ``build()`` naming them, and secrets
never show in a message or a repr. No broker: the stores are made here (cryptography, pyjks)."""

from __future__ import annotations

import datetime
import http.server
import json
import ssl
import threading
from typing import Any

import pytest

from sparkpoint.common import SimpleStringSchema
from sparkpoint.connectors.kafka_access import denied, needed_acl
from sparkpoint.connectors.kafka_client_config import (
    KafkaClientConfig,
    OidcTokenProvider,
    Secret,
    client_config,
    redacted,
)
from sparkpoint.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from sparkpoint.errors import ConfigurationError

PASSWORD = 'pa$$ "quoted" word'
SCRAM = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="job" password="pa$$ \\"quoted\\" word";'
)


def _sink(props: dict[str, str]) -> KafkaSink:
    b = KafkaSink.builder().set_bootstrap_servers("127.0.0.1:1")
    for k, v in props.items():
        b.set_property(k, v)
    return (
        b.set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix("job")
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic("out")
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .build()
    )


def _source(props: dict[str, str]) -> KafkaSource:
    return (
        KafkaSource.builder()
        .set_bootstrap_servers("127.0.0.1:1")
        .set_topics("in")
        .set_properties(props)
        .set_value_only_deserializer(SimpleStringSchema())
        .build()
    )


def test_java_scram_properties_become_both_clients_settings() -> None:
    c = client_config(
        {
            "bootstrap.servers": "b:9093",
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": SCRAM,
        }
    )
    assert "sasl.jaas.config" not in c.librdkafka
    assert (c.librdkafka["sasl.username"], c.librdkafka["sasl.password"]) == ("job", PASSWORD)
    assert c.librdkafka["security.protocol"] == "SASL_PLAINTEXT"
    assert c.kafka_python == {
        "bootstrap_servers": "b:9093",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "job",
        "sasl_plain_password": PASSWORD,
    }
    # kafka-python logs its configuration's repr: the password is not in it.
    assert PASSWORD not in repr(c.kafka_python) and PASSWORD not in repr(c)
    assert isinstance(c.kafka_python["sasl_plain_password"], Secret)


def test_librdkafkas_names_give_the_same_settings() -> None:
    java = client_config(
        {
            "bootstrap.servers": "b:1",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": SCRAM.replace("scram.ScramLoginModule", "plain.PlainLoginModule"),
        }
    )
    rdk = client_config(
        {
            "bootstrap.servers": "b:1",
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "job",
            "sasl.password": PASSWORD,
        }
    )
    assert java.kafka_python == rdk.kafka_python
    assert java.librdkafka == rdk.librdkafka
    # Translating librdkafka's result again changes nothing (the writers' admin gets it).
    assert client_config(java.librdkafka).librdkafka == java.librdkafka


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"ssl.keymanager.algorithm": "SunX509"}, "ssl.keymanager.algorithm"),
        ({"sasl.login.callback.handler.class": "x.Y"}, "sasl.login.callback.handler.class"),
        ({"security.protocol": "SASL_SSL"}, "GSSAPI"),
        ({"security.protocol": "TLS"}, "security.protocol"),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.jaas.config": SCRAM.replace(
                    "scram.ScramLoginModule", "plain.PlainLoginModule"
                ),
            },
            "PlainLoginModule",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": "PlainLoginModule username=job password=" + PASSWORD,
            },
            "sasl.jaas.config",
        ),
        (
            {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"},
            "ssl.endpoint.identification.algorithm",
        ),
        ({"no.such.property": "10"}, "no.such.property"),
    ],
    ids=[
        "keymanager",
        "callback",
        "gssapi",
        "protocol",
        "module",
        "jaas-form",
        "endpoint-id",
        "unknown",
    ],
)
def test_build_refuses_what_cannot_be_translated_naming_it(
    props: dict[str, str], named: str
) -> None:
    for build in (_sink, _source):
        with pytest.raises(ConfigurationError) as e:
            build(props)
        assert named in str(e.value)
        assert PASSWORD not in str(e.value)


def test_endpoint_identification_empty_turns_hostname_checks_off(tmp_path: Any) -> None:
    ca = _ca(tmp_path)
    base = {"security.protocol": "SSL", "ssl.ca.location": ca}
    off = client_config({**base, "ssl.endpoint.identification.algorithm": ""})
    on = client_config(base)
    assert off.librdkafka["ssl.endpoint.identification.algorithm"] == "none"
    assert off.kafka_python["ssl_check_hostname"] is False
    assert on.librdkafka["ssl.endpoint.identification.algorithm"] == "https"
    assert on.kafka_python["ssl_check_hostname"] is True
    assert on.kafka_python["ssl_cafile"] == on.librdkafka["ssl.ca.location"] == ca


def _key_and_cert() -> tuple[Any, Any]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "t")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _ca(tmp_path: Any) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding

    _key, cert = _key_and_cert()
    path = tmp_path / "ca.pem"
    path.write_bytes(cert.public_bytes(Encoding.PEM))
    return str(path)


def test_jks_and_pkcs12_truststores_become_the_same_pem(tmp_path: Any) -> None:
    import jks
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        Encoding,
        pkcs12,
    )

    _key, cert = _key_and_cert()
    der = cert.public_bytes(Encoding.DER)
    jks_path = tmp_path / "trust.jks"
    entry = jks.TrustedCertEntry.new("ca", der)
    jks.KeyStore.new("jks", [entry]).save(str(jks_path), "store-pw")
    p12_path = tmp_path / "trust.p12"
    p12_path.write_bytes(
        pkcs12.serialize_key_and_certificates(
            None, None, None, [cert], BestAvailableEncryption(b"store-pw")
        )
    )
    pems = []
    for path, kind in ((jks_path, "JKS"), (p12_path, "PKCS12")):
        c = client_config(
            {
                "security.protocol": "SSL",
                "ssl.truststore.location": str(path),
                "ssl.truststore.password": "store-pw",
                "ssl.truststore.type": kind,
            }
        )
        assert c.kafka_python["ssl_cafile"] == c.librdkafka["ssl.ca.location"]
        assert "ssl.truststore.location" not in c.librdkafka
        with open(c.librdkafka["ssl.ca.location"], "rb") as f:
            pems.append(f.read())
        ssl.create_default_context(cafile=c.kafka_python["ssl_cafile"])  # OpenSSL takes it
    assert pems[0] == pems[1] == cert.public_bytes(Encoding.PEM)
    with pytest.raises(ConfigurationError, match=r"ssl\.truststore\.password") as e:
        client_config(
            {
                "security.protocol": "SSL",
                "ssl.truststore.location": str(jks_path),
                "ssl.truststore.password": "wrong-pw",
            }
        )
    assert "wrong-pw" not in str(e.value)


def test_pkcs12_keystore_gives_a_client_certificate_and_encrypted_key(tmp_path: Any) -> None:
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12

    key, cert = _key_and_cert()
    path = tmp_path / "client.p12"
    path.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"client", key, cert, None, BestAvailableEncryption(b"key-pw")
        )
    )
    c = client_config(
        {
            "security.protocol": "SSL",
            "ssl.keystore.location": str(path),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.password": "key-pw",
        }
    )
    lib, kp = c.librdkafka, c.kafka_python
    assert (lib["ssl.certificate.location"], lib["ssl.key.location"]) == (
        kp["ssl_certfile"],
        kp["ssl_keyfile"],
    )
    assert "ssl.keystore.location" not in lib and lib["ssl.key.password"] == "key-pw"
    with open(kp["ssl_keyfile"], "rb") as f:
        assert b"ENCRYPTED PRIVATE KEY" in f.read()
    # OpenSSL loads the pair with the password, as both clients will.
    ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(
        kp["ssl_certfile"], kp["ssl_keyfile"], str(kp["ssl_password"])
    )


def test_secrets_are_redacted_in_reprs() -> None:
    props = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": SCRAM,
    }
    sink, source = _sink(props), _source(props)
    for text in (repr(sink), repr(source), repr(client_config(props)), str(redacted(props))):
        assert PASSWORD not in text and "pa$$" not in text
    assert repr(Secret("x")) == "'[redacted]'" and f"{Secret('x')}" == "x"
    assert isinstance(client_config(props), KafkaClientConfig)


def test_oauthbearer_unsecured_and_oidc() -> None:
    unsecured = client_config(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                'unsecuredLoginStringClaim_sub="job";'
            ),
        }
    )
    assert unsecured.librdkafka["sasl.oauthbearer.config"] == "principal=job"
    token = unsecured.kafka_python["sasl_oauth_token_provider"].token()
    _header, payload, signature = token.split(".")
    assert signature == "" and json.loads(_b64(payload))["sub"] == "job"

    seen: list[tuple[str, str]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            seen.append((self.headers["Authorization"], body))
            answer = json.dumps({"access_token": "tok-1", "expires_in": 3600}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/token"
        oidc = client_config(
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.token.endpoint.url": url,
                "sasl.jaas.config": (
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                    'required clientId="app" clientSecret="s3cret" scope="kafka";'
                ),
            }
        )
        provider = oidc.kafka_python["sasl_oauth_token_provider"]
        assert isinstance(provider, OidcTokenProvider)
        assert (provider.token(), provider.token()) == ("tok-1", "tok-1")
        assert len(seen) == 1  # kept until it nears its expiry
        auth, body = seen[0]
        assert auth == "Basic YXBwOnMzY3JldA==" and "grant_type=client_credentials" in body
        assert oidc.librdkafka["sasl.oauthbearer.method"] == "oidc"
        assert "s3cret" not in repr(oidc)
    finally:
        server.shutdown()


def _b64(s: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def test_refusals_name_the_missing_acl() -> None:
    assert needed_acl("WriteTxnMarkers", 31, "t-0") == "ClusterAction on the Cluster"
    e = denied("EndTxn", 53, "job-7", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
    assert e is not None and "Write on TransactionalId 'job-7'" in str(e)
    e = denied("DescribeProducers", 29, "out", "TOPIC_AUTHORIZATION_FAILED")
    assert e is not None and "Read on Topic 'out'" in str(e)
    assert denied("EndTxn", 51, "job-7", "CONCURRENT_TRANSACTIONS") is None


def test_a_refused_principal_in_a_tasks_error_ends_the_job() -> None:
    """The job master reads a ``KafkaAccessError`` out of Spark's error text (a task's) or
    the exception chain (the driver's): no restart can fix it."""
    from sparkpoint.errors import KafkaAccessError
    from sparkpoint.runtime.driver.failures import access_denied

    line = "Kafka refused InitProducerId on TransactionalId 'j-1': needs Write on it"
    spark_text = f'Traceback:\n  File "w.py", line 3\nsparkpoint.errors.KafkaAccessError: {line}\n'
    assert access_denied(RuntimeError(spark_text)) == line
    try:
        try:
            raise KafkaAccessError(line)
        except KafkaAccessError as e:
            raise RuntimeError("epoch 3 failed") from e
    except RuntimeError as wrapped:
        assert access_denied(wrapped) == line
    assert access_denied(RuntimeError("ValueError: bad record")) is None
