"""One Kafka client configuration for every connection of the Kafka connector.

The user's properties (``KafkaSource``/``KafkaSink`` builders' ``set_property``), with Kafka's
Java client names as a PyFlink program sets them or librdkafka's, become (a) librdkafka's
configuration for the confluent-kafka consumers and producers that move records and (b)
kafka-python's keyword arguments for the admin client that commits, fences and sweeps
transactions: the same TLS (CA, client certificate, hostname verification) and SASL (PLAIN,
SCRAM-SHA-256/512, OAUTHBEARER) on every connection.

Java's names are translated where a translation exists: ``sasl.jaas.config`` (PLAIN, SCRAM,
OAUTHBEARER's login modules), ``ssl.truststore.*``/``ssl.keystore.*`` (JKS, PKCS12 or PEM
stores, converted to PEM files in a private directory of this machine's temp dir, named by
their content), ``ssl.endpoint.identification.algorithm`` (empty: no hostname check). A Java
property with no counterpart is refused, naming it (``check_properties``, at ``build()``).
Secret values (passwords, JAAS lines, keys, tokens) never appear in a message or a repr.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import re
import ssl
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sparkpoint.errors import ConfigurationError

__all__ = [
    "KafkaClientConfig",
    "Secret",
    "check_librdkafka",
    "check_properties",
    "client_config",
    "is_secret",
    "redacted",
]

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# JAAS login modules (by class name, any package: Flink's jars shade Kafka's) -> mechanisms.
_MODULES = {
    "PlainLoginModule": ("PLAIN",),
    "ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    "OAuthBearerLoginModule": ("OAUTHBEARER",),
}
# Java client properties with no counterpart in either Python client, and why.
_JAVA_ONLY = {
    "sasl.login.callback.handler.class": "a Java class",
    "sasl.client.callback.handler.class": "a Java class",
    "sasl.login.class": "a Java class",
    "ssl.engine.factory.class": "a Java class",
    "ssl.keymanager.algorithm": "a Java security provider's algorithm",
    "ssl.trustmanager.algorithm": "a Java security provider's algorithm",
    "ssl.secure.random.implementation": "a Java security provider's algorithm",
    "ssl.provider": "a Java security provider",
    "security.providers": "Java security providers",
    "ssl.protocol": "the TLS versions are OpenSSL's defaults (TLS 1.2 and 1.3)",
    "ssl.enabled.protocols": "the TLS versions are OpenSSL's defaults (TLS 1.2 and 1.3)",
    "sasl.login.refresh.window.factor": "the Python clients refresh logins their own way",
    "sasl.login.refresh.window.jitter": "the Python clients refresh logins their own way",
    "sasl.login.refresh.min.period.seconds": "the Python clients refresh logins their own way",
    "sasl.login.refresh.buffer.seconds": "the Python clients refresh logins their own way",
    "sasl.login.connect.timeout.ms": "no such setting in the Python clients",
    "sasl.login.read.timeout.ms": "no such setting in the Python clients",
    "sasl.login.retry.backoff.ms": "no such setting in the Python clients",
    "sasl.login.retry.backoff.max.ms": "no such setting in the Python clients",
    "sasl.kerberos.min.time.before.relogin": "GSSAPI (Kerberos) is not supported",
    "sasl.kerberos.ticket.renew.jitter": "GSSAPI (Kerberos) is not supported",
    "sasl.kerberos.ticket.renew.window.factor": "GSSAPI (Kerberos) is not supported",
}
# Properties this module reads and replaces by librdkafka's own (or by files it writes).
_TRANSLATED = {
    "sasl.jaas.config",
    "sasl.mechanism",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
    "ssl.truststore.certificates",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.endpoint.identification.algorithm",
    "sasl.oauthbearer.token.endpoint.url",
}
_SECRET_WORDS = ("password", "secret", "jaas", "token", "ssl.key.pem", "ssl.keystore.key")


def is_secret(key: str) -> bool:
    """Whether property ``key``'s value is a secret (a password, a JAAS line, a key...)."""
    k = key.lower()
    return any(w in k for w in _SECRET_WORDS) or k == "sasl.oauthbearer.config"


def redacted(properties: Mapping[str, Any]) -> dict[str, Any]:
    """``properties`` with every secret value replaced by ``[redacted]``."""
    return {k: "[redacted]" if is_secret(k) else v for k, v in properties.items()}


class Secret(str):
    """A string whose repr hides it: kafka-python logs its configuration's repr."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'[redacted]'"


@dataclass(frozen=True)
class KafkaClientConfig:
    """The connection settings for both Python clients: ``librdkafka`` (the user's properties
    with Java's names translated; also every non-connection property) and ``kafka_python``
    (``KafkaAdminClient``'s keyword arguments)."""

    librdkafka: dict[str, Any]
    kafka_python: dict[str, Any]

    def __repr__(self) -> str:
        return (
            f"KafkaClientConfig(librdkafka={redacted(self.librdkafka)!r}, "
            f"kafka_python={redacted(self.kafka_python)!r})"
        )


def client_config(properties: Mapping[str, str]) -> KafkaClientConfig:
    """The configuration of every Kafka client for ``properties`` (translated once per
    process; stores are converted to PEM files on first use)."""
    return _cached(tuple(sorted((str(k), str(v)) for k, v in properties.items())))


def check_properties(properties: Mapping[str, str]) -> None:
    """Refuse (``ConfigurationError`` naming the property) what cannot be translated: a Java
    property with no counterpart, a malformed ``sasl.jaas.config``, a store that cannot be
    opened with its password, conflicting settings."""
    client_config(properties)


def check_librdkafka(conf: Mapping[str, Any], kind: str) -> None:
    """Have librdkafka check ``conf`` (a ``consumer`` or ``producer`` configuration) without
    connecting: an unknown property or a bad value fails ``build()``, naming it, instead
    of every task."""
    from confluent_kafka import Consumer, KafkaException, Producer

    probe = {k: v for k, v in conf.items() if k != "bootstrap.servers"}
    probe["log_level"] = 0
    try:
        if kind == "consumer":
            probe.setdefault("group.id", "sparkpoint-config-check")
            Consumer(probe).close()
        else:
            Producer(probe).flush(0)
    except (KafkaException, ValueError, TypeError) as e:
        raise ConfigurationError(f"Kafka {kind} properties refused by librdkafka: {e}") from None


@functools.lru_cache(maxsize=64)
def _cached(items: tuple[tuple[str, str], ...]) -> KafkaClientConfig:
    return _translate(dict(items))


def _translate(props: dict[str, str]) -> KafkaClientConfig:
    for key in props:
        if key in _JAVA_ONLY:
            raise ConfigurationError(
                f"Kafka property {key} is not supported: {_JAVA_ONLY[key]} (it has no "
                "counterpart in the Python Kafka clients); remove it"
            )
    lib: dict[str, Any] = {k: v for k, v in props.items() if k not in _TRANSLATED}
    kp: dict[str, Any] = {"bootstrap_servers": props.get("bootstrap.servers", "localhost:9092")}

    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in _PROTOCOLS:
        raise ConfigurationError(
            f"Kafka property security.protocol = {props['security.protocol']!r}: expected one "
            f"of {', '.join(_PROTOCOLS)}"
        )
    lib["security.protocol"] = protocol
    kp["security_protocol"] = protocol
    if protocol.startswith("SASL_"):
        _sasl(props, lib, kp)
    if protocol in ("SSL", "SASL_SSL"):
        _tls(props, lib, kp)
    return KafkaClientConfig(lib, kp)


# -- SASL ------------------------------------------------------------------------------------


def _sasl(props: dict[str, str], lib: dict[str, Any], kp: dict[str, Any]) -> None:
    java, rdk = props.get("sasl.mechanism"), props.get("sasl.mechanisms")
    if java is not None and rdk is not None and java.upper() != rdk.upper():
        raise ConfigurationError(
            f"Kafka properties sasl.mechanism = {java!r} and sasl.mechanisms = {rdk!r} differ"
        )
    mechanism = (java or rdk or "GSSAPI").upper()  # GSSAPI: both clients' default
    if mechanism not in _MECHANISMS:
        raise ConfigurationError(
            f"Kafka property sasl.mechanism = {mechanism!r} is not supported: expected one of "
            f"{', '.join(_MECHANISMS)}" + (" (GSSAPI is the default)" if not (java or rdk) else "")
        )
    lib.pop("sasl.mechanisms", None)
    lib["sasl.mechanism"] = mechanism
    kp["sasl_mechanism"] = mechanism
    options: dict[str, str] = {}
    if "sasl.jaas.config" in props:
        module, options = _jaas(props["sasl.jaas.config"])
        if mechanism not in _MODULES[module]:
            raise ConfigurationError(
                f"Kafka property sasl.jaas.config names the login module {module}, which is "
                f"not for sasl.mechanism = {mechanism} (expected "
                f"{next(m for m, ms in _MODULES.items() if mechanism in ms)})"
            )
    if mechanism == "OAUTHBEARER":
        _oauthbearer(props, options, lib, kp)
        return
    for option, key in (("username", "sasl.username"), ("password", "sasl.password")):
        if option in options and key in props and options[option] != props[key]:
            raise ConfigurationError(
                f"Kafka properties sasl.jaas.config and {key} give different {option}s"
            )
        value = options.get(option, props.get(key))
        if value is None:
            raise ConfigurationError(
                f"Kafka SASL {mechanism} needs a {option}: set sasl.jaas.config "
                f'(... required username="..." password="...";) or {key}'
            )
        lib[key] = value
    kp["sasl_plain_username"] = lib["sasl.username"]
    kp["sasl_plain_password"] = Secret(lib["sasl.password"])


_JAAS = re.compile(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b(.*?);?\s*$", re.S)
_OPTION = re.compile(r'\s*([\w.$-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";=]+))', re.S)


_JAAS_FORM = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'
)


def _jaas(line: str) -> tuple[str, dict[str, str]]:
    """The login module's class name (without package) and its options, from one JAAS entry
    as Kafka's ``sasl.jaas.config`` takes it. The value is never quoted in an error: it
    holds the password."""
    form = _JAAS_FORM
    m = _JAAS.fullmatch(line)
    if m is None:
        raise ConfigurationError(
            f"Kafka property sasl.jaas.config is not one JAAS login module entry of the form {form}"
        )
    module = m.group(1).rsplit(".", 1)[-1]
    if module not in _MODULES:
        raise ConfigurationError(
            f"Kafka property sasl.jaas.config names the login module {module}: supported are "
            f"{', '.join(sorted(_MODULES))} (Kafka's, in org.apache.kafka.common.security)"
        )
    rest, options, pos = m.group(3), {}, 0
    while rest[pos:].strip():
        o = _OPTION.match(rest, pos)
        if o is None:
            raise ConfigurationError(
                "Kafka property sasl.jaas.config: the options after the control flag are not "
                f'name=value or name="value" pairs (expected the form {form})'
            )
        quoted = o.group(2)
        options[o.group(1)] = (
            re.sub(r"\\(.)", r"\1", quoted, flags=re.S) if quoted is not None else o.group(3)
        )
        pos = o.end()
    return module, options


def _oauthbearer(
    props: dict[str, str], options: dict[str, str], lib: dict[str, Any], kp: dict[str, Any]
) -> None:
    """OAUTHBEARER: an unsecured token (JAAS ``unsecuredLoginStringClaim_sub``, for brokers
    that accept them) or OIDC client credentials (JAAS ``clientId``/``clientSecret``/
    ``scope`` with ``sasl.oauthbearer.token.endpoint.url``, or librdkafka's names)."""
    sub = options.get("unsecuredLoginStringClaim_sub")
    if sub is not None:
        lib["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
        lib["sasl.oauthbearer.config"] = f"principal={sub}"
        kp["sasl_oauth_token_provider"] = _registered(UnsecuredTokenProvider(sub))
        return
    endpoint = props.get("sasl.oauthbearer.token.endpoint.url")
    client_id = options.get("clientId", props.get("sasl.oauthbearer.client.id"))
    secret = options.get("clientSecret", props.get("sasl.oauthbearer.client.secret"))
    scope = options.get("scope", props.get("sasl.oauthbearer.scope"))
    if endpoint is None or client_id is None or secret is None:
        raise ConfigurationError(
            "Kafka SASL OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url and a client id "
            'and secret (sasl.jaas.config "... OAuthBearerLoginModule required clientId=\\"...\\" '
            'clientSecret=\\"...\\";", or sasl.oauthbearer.client.id and '
            "sasl.oauthbearer.client.secret), or an unsecured token "
            "(unsecuredLoginStringClaim_sub)"
        )
    lib.update(
        {
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.token.endpoint.url": endpoint,
            "sasl.oauthbearer.client.id": client_id,
            "sasl.oauthbearer.client.secret": secret,
        }
    )
    if scope is not None:
        lib["sasl.oauthbearer.scope"] = scope
    kp["sasl_oauth_token_provider"] = _registered(
        OidcTokenProvider(endpoint, client_id, secret, scope)
    )


def _registered(provider: Any) -> Any:
    """``provider``, its class registered as kafka-python's ``AbstractTokenProvider`` (an
    ABC: kafka-python checks ``isinstance``; kafka is imported only when OAUTHBEARER is
    used)."""
    from kafka.net.sasl.oauth import AbstractTokenProvider

    AbstractTokenProvider.register(type(provider))
    return provider


class UnsecuredTokenProvider:
    """kafka-python's OAUTHBEARER token: an unsigned JWT for ``sub`` (what Java's
    ``unsecuredLoginStringClaim_sub`` makes; only brokers with the unsecured validator take
    it)."""

    def __init__(self, sub: str) -> None:
        self.sub = sub

    def token(self) -> str:
        def part(d: dict[str, Any]) -> str:
            return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")

        now = int(time.time())
        return f"{part({'alg': 'none'})}.{part({'sub': self.sub, 'iat': now, 'exp': now + 3600})}."

    def extensions(self) -> dict[str, str]:
        """No SASL extensions."""
        return {}

    def __repr__(self) -> str:
        return f"UnsecuredTokenProvider(sub={self.sub!r})"


class OidcTokenProvider:
    """kafka-python's OAUTHBEARER token from an OIDC token endpoint (client credentials
    grant, as Java's ``OAuthBearerLoginCallbackHandler`` and librdkafka's ``oidc``), kept
    until shortly before it expires."""

    def __init__(self, endpoint: str, client_id: str, secret: str, scope: str | None) -> None:
        self.endpoint = endpoint
        self.client_id = client_id
        self._secret = Secret(secret)
        self.scope = scope
        self._token: tuple[str, float] | None = None
        self._lock = threading.Lock()

    def token(self) -> str:
        with self._lock:
            if self._token is None or time.monotonic() > self._token[1]:
                self._token = self._fetch()
            return self._token[0]

    def _fetch(self) -> tuple[str, float]:
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        basic = base64.b64encode(f"{self.client_id}:{self._secret}".encode()).decode()
        request = urllib.request.Request(
            self.endpoint,
            data=urllib.parse.urlencode(form).encode(),
            headers={
                "Authorization": f"Basic {basic}",
                "Content-Type": "application/x-www-form-urlencoded",
            },
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            body = json.loads(response.read())
        if not isinstance(body, dict) or not isinstance(body.get("access_token"), str):
            raise ConfigurationError(
                f"the OAuth token endpoint {self.endpoint} answered without an access_token"
            )
        lifetime = float(body.get("expires_in", 3600))
        return body["access_token"], time.monotonic() + lifetime * 0.8

    def extensions(self) -> dict[str, str]:
        """No SASL extensions."""
        return {}

    def __repr__(self) -> str:
        return f"OidcTokenProvider(endpoint={self.endpoint!r}, client_id={self.client_id!r})"


# -- TLS -------------------------------------------------------------------------------------


def _tls(props: dict[str, str], lib: dict[str, Any], kp: dict[str, Any]) -> None:
    ca = _ca_file(props)
    if ca is not None:
        lib.pop("ssl.ca.pem", None)
        lib["ssl.ca.location"] = ca
        kp["ssl_cafile"] = ca
    client = _client_files(props)
    if client is not None:
        cert, key, password = client
        for k in ("ssl.certificate.pem", "ssl.key.pem", "ssl.keystore.location"):
            lib.pop(k, None)
        lib["ssl.certificate.location"], lib["ssl.key.location"] = cert, key
        kp["ssl_certfile"], kp["ssl_keyfile"] = cert, key
        if password is not None:
            lib["ssl.key.password"] = password
            kp["ssl_password"] = Secret(password)
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("", "none", "https"):
        raise ConfigurationError(
            "Kafka property ssl.endpoint.identification.algorithm = "
            f"{props['ssl.endpoint.identification.algorithm']!r}: expected https or an empty "
            "value (no hostname verification)"
        )
    lib["ssl.endpoint.identification.algorithm"] = "https" if algorithm == "https" else "none"
    kp["ssl_check_hostname"] = algorithm == "https"
    verify = props.get("enable.ssl.certificate.verification", "true").strip().lower()
    if verify == "false":
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        if client is not None:
            context.load_cert_chain(client[0], client[1], client[2])
        kp["ssl_context"] = context


def _ca_file(props: dict[str, str]) -> str | None:
    """A PEM file of the CA certificates to trust (None: the system's)."""
    given = [
        k for k in ("ssl.ca.location", "ssl.ca.pem", "ssl.truststore.location") if k in props
    ] + (["ssl.truststore.certificates"] if "ssl.truststore.certificates" in props else [])
    if len(given) > 1:
        raise ConfigurationError(
            f"Kafka properties {' and '.join(given)} both name the trusted certificates: set one"
        )
    if not given:
        return None
    key = given[0]
    if key == "ssl.ca.location":
        return _readable(props, key)
    if key in ("ssl.ca.pem", "ssl.truststore.certificates"):
        return _write_pem(_pem_certs(props[key].encode(), key))
    store_type = props.get("ssl.truststore.type", "JKS").upper()
    path = _readable(props, key)
    password = props.get("ssl.truststore.password")
    certs, _key = _open_store(path, store_type, password, "ssl.truststore", None)
    if not certs:
        raise ConfigurationError(f"Kafka property {key}: the store {path} holds no certificate")
    return _write_pem(b"".join(certs))


def _client_files(props: dict[str, str]) -> tuple[str, str, str | None] | None:
    """The client certificate chain's and key's PEM files and the key's password."""
    if "ssl.keystore.location" in props:
        store_type = props.get("ssl.keystore.type", "JKS").upper()
        path = _readable(props, "ssl.keystore.location")
        store_password = props.get("ssl.keystore.password")
        key_password = props.get("ssl.key.password", store_password)
        certs, key = _open_store(path, store_type, store_password, "ssl.keystore", key_password)
        if key is None or not certs:
            raise ConfigurationError(
                f"Kafka property ssl.keystore.location: the store {path} holds no private key "
                "with its certificate"
            )
        return _write_pem(b"".join(certs)), _write_key(key, key_password), key_password
    if "ssl.keystore.certificate.chain" in props or "ssl.keystore.key" in props:
        chain, pem_key = props.get("ssl.keystore.certificate.chain"), props.get("ssl.keystore.key")
        if chain is None or pem_key is None:
            raise ConfigurationError(
                "Kafka properties ssl.keystore.certificate.chain and ssl.keystore.key go together"
            )
        password = props.get("ssl.key.password")
        key = _load_pem_key(pem_key.encode(), password, "ssl.keystore.key")
        chain_pem = _pem_certs(chain.encode(), "ssl.keystore.certificate.chain")
        return _write_pem(chain_pem), _write_key(key, password), password
    if "ssl.certificate.location" in props or "ssl.certificate.pem" in props:
        if "ssl.certificate.location" in props:
            cert = _readable(props, "ssl.certificate.location")
        else:
            cert = _write_pem(
                _pem_certs(props["ssl.certificate.pem"].encode(), "ssl.certificate.pem")
            )
        password = props.get("ssl.key.password")
        if "ssl.key.location" in props:
            key_file = _readable(props, "ssl.key.location")
        elif "ssl.key.pem" in props:
            key = _load_pem_key(props["ssl.key.pem"].encode(), password, "ssl.key.pem")
            key_file = _write_key(key, password)
        else:
            raise ConfigurationError(
                "Kafka property ssl.certificate.location needs ssl.key.location (the client "
                "certificate's private key)"
            )
        return cert, key_file, password
    return None


def _readable(props: dict[str, str], key: str) -> str:
    path = props[key]
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise ConfigurationError(f"Kafka property {key} = {path!r}: no readable file there")
    return path


def _open_store(
    path: str, store_type: str, password: str | None, prefix: str, key_password: str | None
) -> tuple[list[bytes], Any]:
    """The PEM certificates and the private key (a ``cryptography`` key, or None) of a JKS,
    PKCS12 or PEM store."""
    with open(path, "rb") as f:
        data = f.read()
    if store_type == "PEM":
        certs = _split_pem(data)
        key = (
            _load_pem_key(data, key_password, f"{prefix}.location")
            if b"PRIVATE KEY" in data
            else None
        )
        return certs, key
    if store_type == "PKCS12":
        from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

        try:
            p12 = pkcs12.load_pkcs12(data, password.encode() if password else None)
        except ValueError:
            raise ConfigurationError(
                f"Kafka property {prefix}.location: cannot open the PKCS12 store {path} with "
                f"{prefix}.password (wrong password, or not a PKCS12 file)"
            ) from None
        cert_list = ([p12.cert] if p12.cert is not None else []) + list(p12.additional_certs)
        return [c.certificate.public_bytes(Encoding.PEM) for c in cert_list], p12.key
    if store_type == "JKS":
        return _open_jks(path, data, password, prefix, key_password)
    raise ConfigurationError(
        f"Kafka property {prefix}.type = {store_type!r}: expected JKS, PKCS12 or PEM"
    )


def _open_jks(
    path: str, data: bytes, password: str | None, prefix: str, key_password: str | None
) -> tuple[list[bytes], Any]:
    try:
        import jks  # pyjks, in the kafka extra
    except ImportError:
        raise ConfigurationError(
            f"Kafka property {prefix}.location names a JKS store: reading one needs pyjks "
            "(pip install 'sparkpoint[kafka]'), or convert it to PKCS12 with keytool "
            "-importkeystore"
        ) from None
    from cryptography.hazmat.primitives.serialization import load_der_private_key

    try:
        store = jks.KeyStore.loads(data, password or "", try_decrypt_keys=False)
    except Exception:
        raise ConfigurationError(
            f"Kafka property {prefix}.location: cannot open the JKS store {path} with "
            f"{prefix}.password (wrong password, or not a JKS file)"
        ) from None
    certs = [_der_to_pem(c.cert) for c in store.certs.values()]
    key = None
    for entry in store.private_keys.values():
        try:
            if not entry.is_decrypted():
                entry.decrypt(key_password or password or "")
        except Exception:
            raise ConfigurationError(
                f"Kafka property ssl.key.password: cannot decrypt the key in the JKS store {path}"
            ) from None
        key = load_der_private_key(entry.pkey_pkcs8, None)
        certs = [_der_to_pem(der) for _type, der in entry.cert_chain] + certs
        break
    return certs, key


def _der_to_pem(der: bytes) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    return x509.load_der_x509_certificate(der).public_bytes(Encoding.PEM)


_PEM_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----\s*", re.S)


def _split_pem(data: bytes) -> list[bytes]:
    return [m.group(0).strip() + b"\n" for m in _PEM_CERT.finditer(data)]


def _pem_certs(data: bytes, key: str) -> bytes:
    certs = _split_pem(data)
    if not certs:
        raise ConfigurationError(f"Kafka property {key} holds no PEM certificate")
    return b"".join(certs)


def _load_pem_key(data: bytes, password: str | None, key: str) -> Any:
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    m = re.search(
        rb"-----BEGIN [A-Z ]*PRIVATE KEY-----.+?-----END [A-Z ]*PRIVATE KEY-----", data, re.S
    )
    if m is None:
        raise ConfigurationError(f"Kafka property {key} holds no PEM private key")
    try:
        return load_pem_private_key(m.group(0), password.encode() if password else None)
    except (ValueError, TypeError):
        raise ConfigurationError(
            f"Kafka property {key}: cannot read its private key (wrong or missing "
            "ssl.key.password?)"
        ) from None


def _pem_dir() -> str:
    """This user's private directory for the PEM files made from stores (mode 0700)."""
    path = os.path.join(tempfile.gettempdir(), f"sparkpoint-kafka-tls-{os.getuid()}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.lstat(path)
    if not os.path.isdir(path) or os.path.islink(path) or st.st_uid != os.getuid():
        raise ConfigurationError(f"{path} is not a private directory of this user")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def _write_pem(data: bytes) -> str:
    """``data`` in a file of the private directory named by its content; its path."""
    path = os.path.join(_pem_dir(), hashlib.sha256(data).hexdigest()[:32] + ".pem")
    if not os.path.exists(path):
        _atomic(path, data)
    return path


def _write_key(key: Any, password: str | None) -> str:
    """A private key as a PKCS8 PEM file, encrypted with ``password`` when there is one."""
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        Encoding,
        NoEncryption,
        PrivateFormat,
    )

    if password:
        # Encrypted output differs per run (a random salt): name it by the key itself.
        plain = key.private_bytes(Encoding.DER, PrivateFormat.PKCS8, NoEncryption())
        name = hashlib.sha256(plain + password.encode()).hexdigest()[:32] + ".key.pem"
        path = os.path.join(_pem_dir(), name)
        if not os.path.exists(path):
            _atomic(
                path,
                key.private_bytes(
                    Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(password.encode())
                ),
            )
        return path
    data = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    path = os.path.join(_pem_dir(), hashlib.sha256(data).hexdigest()[:32] + ".key.pem")
    if not os.path.exists(path):
        _atomic(path, data)
    return path


def _atomic(path: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))  # mode 0600
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
