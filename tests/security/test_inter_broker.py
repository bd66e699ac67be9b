"""exactly.security.inter_broker: a broker's client side towards its peers from its Kafka settings, and the
sans-IO SASL steps its connections drive (the whole path runs in tests/interop/test_cluster_security.py)."""

from __future__ import annotations

import socket
import ssl
import threading

import pytest

from exactly.client.security import ClientSecurity, SaslRefusedError
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.sasl_authenticate import SaslAuthenticateResponse
from exactly.protocol.messages.sasl_handshake import SaslHandshakeResponse
from exactly.security.inter_broker import InterBrokerConfigError, inter_broker_security
from exactly.security.listeners import Listener, SecurityProtocol
from exactly.security.tls import TlsSettings, build_context
from tests.interop.tls_support import TlsFiles, make_tls_files


def _listener(protocol: SecurityProtocol, name: str = "INTERNAL") -> Listener:
    return Listener(name, "127.0.0.1", 0, protocol, "127.0.0.1", 0)


JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="b1" password="s3cr\\"t";'


def test_plaintext_needs_nothing() -> None:
    assert inter_broker_security(_listener(SecurityProtocol.PLAINTEXT), {}) is None


def test_sasl_takes_the_mechanism_and_the_listeners_jaas_credentials() -> None:
    props = {
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": JAAS,
        "listener.name.internal.sasl.jaas.config": 'x required username="other" password="o";',
    }
    got = inter_broker_security(_listener(SecurityProtocol.SASL_PLAINTEXT), props)
    assert got is not None
    assert (got.protocol, got.mechanism, got.username, got.password) == (
        SecurityProtocol.SASL_PLAINTEXT,
        "SCRAM-SHA-512",
        "b1",
        's3cr"t',
    )


@pytest.mark.parametrize("key", ["listener.name.internal.sasl.jaas.config", "sasl.jaas.config"])
def test_jaas_falls_back_as_kafka_does(key: str) -> None:
    props = {"sasl.mechanism.inter.broker.protocol": "PLAIN", key: JAAS}
    got = inter_broker_security(_listener(SecurityProtocol.SASL_PLAINTEXT), props)
    assert got is not None
    assert (got.mechanism, got.username) == ("PLAIN", "b1")


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({}, "GSSAPI"),  # Kafka's default mechanism, which exactly does not have
        ({"sasl.mechanism.inter.broker.protocol": "PLAIN"}, "no JAAS config"),
        (
            {"sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.jaas.config": 'x required user_a="p";'},
            "no username",
        ),
    ],
)
def test_unusable_settings_are_refused(props: dict[str, str], message: str) -> None:
    with pytest.raises(InterBrokerConfigError, match=message):
        inter_broker_security(_listener(SecurityProtocol.SASL_PLAINTEXT), props)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("certs"))


def test_tls_checks_the_peer_and_presents_the_brokers_certificate(files: TlsFiles) -> None:
    listener = _listener(SecurityProtocol.SSL)
    props = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(files.server),
        "ssl.truststore.type": "PEM",
        "listener.name.internal.ssl.truststore.location": str(files.ca),
        "ssl.client.auth": "required",
    }
    client = inter_broker_security(listener, props)
    assert client is not None
    assert client.tls_context is not None
    server_ctx = build_context(TlsSettings.for_listener(listener, props))
    a, b = socket.socketpair()
    seen: dict[str, object] = {}

    def serve() -> None:
        try:
            with server_ctx.wrap_socket(a, server_side=True) as s:
                seen["peer"] = s.getpeercert()
                s.sendall(b"y")
        except (ssl.SSLError, OSError) as e:
            seen["error"] = e

    thread = threading.Thread(target=serve)
    thread.start()
    with client.ssl_context().wrap_socket(b, server_hostname="localhost") as c:
        assert c.recv(1) == b"y"
    thread.join(10)
    assert "error" not in seen
    assert seen["peer"]


def _drive(security: ClientSecurity, answers: list[object]) -> list[tuple[ApiKey, int, object]]:
    steps = security.sasl_steps()
    sent = []
    try:
        step = next(steps)
        for answer in answers:
            sent.append(step)
            step = steps.send(answer)
    except StopIteration:
        return sent
    raise AssertionError(f"more steps than answers: {step}")


def test_plain_steps_are_one_handshake_and_one_token() -> None:
    security = ClientSecurity(SecurityProtocol.SASL_PLAINTEXT, "PLAIN", "u", "p")
    sent = _drive(security, [SaslHandshakeResponse(0, ["PLAIN"]), SaslAuthenticateResponse(0, None, b"")])
    assert [(key, version) for key, version, _ in sent] == [
        (ApiKey.SASL_HANDSHAKE, 1),
        (ApiKey.SASL_AUTHENTICATE, 2),
    ]
    assert sent[1][2].auth_bytes == b"\0u\0p"  # type: ignore[attr-defined]
    assert _drive(ClientSecurity(), []) == []  # no SASL: no steps


def test_refusals_raise() -> None:
    security = ClientSecurity(SecurityProtocol.SASL_SSL, "SCRAM-SHA-256", "u", "p")
    with pytest.raises(SaslRefusedError) as refused:
        _drive(security, [SaslHandshakeResponse(ErrorCode.UNSUPPORTED_SASL_MECHANISM, ["PLAIN"])])
    assert refused.value.code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    with pytest.raises(SaslRefusedError, match="bad"):
        _drive(
            security,
            [
                SaslHandshakeResponse(0, []),
                SaslAuthenticateResponse(ErrorCode.SASL_AUTHENTICATION_FAILED, "bad"),
            ],
        )
