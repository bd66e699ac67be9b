"""SASL/OAUTHBEARER with unsecured JWS tokens (development only) with the real clients: confluent-kafka
and kcat (librdkafka's `enable.sasl.oauthbearer.unsecure.jwt`), kafka-python and aiokafka (token
providers), exactly's 2PC client; raw sockets for Kafka's error-challenge exchange.

One broker: an OAUTH listener (SASL_PLAINTEXT, OAUTHBEARER only, scope `kafka` required, 1 s clock skew)
and a PLAINTEXT one on loopback; the StandardAuthorizer with ACLs for User:alice only, so the principal
named in the token is the one authorized.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from aiokafka.abc import AbstractTokenProvider as AioTokenProvider
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, ResourceType
from confluent_kafka.admin import ResourcePatternType as Pattern
from kafka.net.sasl.oauth import AbstractTokenProvider

from exactly.client.twopc import TwoPhaseClient
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from exactly.protocol.messages.sasl_handshake import SaslHandshakeRequest
from exactly.security.oauthbearer import client_initial_response, unsecured_jws
from exactly.testing.processes import BrokerProcess, free_port
from tests.interop.client import RawClient
from tests.interop.support import running_broker
from tests.interop.tls_support import (
    aiokafka_round_trip,
    consume_confluent,
    kafka_python_round_trip,
    kcat_round_trip,
    unique_topic,
)

pytestmark = pytest.mark.interop

JAAS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
    'unsecuredValidatorRequiredScope="kafka" unsecuredValidatorAllowableClockSkewMs="1000";'
)


@dataclass(frozen=True)
class OAuthBroker:
    proc: BrokerProcess
    oauth_port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.oauth_port}"

    def confluent(self, principal: str = "alice", scope: str = "kafka") -> dict[str, str]:
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": f"principal={principal} scope={scope}",
        }

    def lines(self, text: str) -> list[str]:
        return [line for line in self.proc.full_log().splitlines() if text in line]


@pytest.fixture(scope="module")
def oauth_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthBroker]:
    oauth_port, plain_port = free_port(), free_port()
    settings = [
        f"listeners=OAUTH://127.0.0.1:{oauth_port},PLAINTEXT://127.0.0.1:{plain_port}",
        "listener.security.protocol.map=OAUTH:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER",
        f"listener.name.oauth.oauthbearer.sasl.jaas.config={JAAS}",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:ANONYMOUS",  # the loopback PLAINTEXT listener's admin
    ]
    with running_broker(tmp_path_factory.mktemp("oauth") / "data", *settings, port=plain_port) as proc:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain_port}"})
        acls = [
            AclBinding(
                kind, name, Pattern.LITERAL, "User:alice", "*", AclOperation.ALL, AclPermissionType.ALLOW
            )
            for kind, name in [(ResourceType.TOPIC, "*"), (ResourceType.GROUP, "*")]
        ]
        for future in admin.create_acls(acls).values():
            future.result(30)
        yield OAuthBroker(proc, oauth_port)


def test_enabling_it_warns_at_start(oauth_broker: OAuthBroker) -> None:
    [warning] = oauth_broker.lines("OAUTHBEARER")[:1]
    assert " WARNING " in warning
    assert "listener OAUTH enables OAUTHBEARER with unsecured JWS tokens" in warning


def test_confluent_kafka_produces_and_consumes_as_the_tokens_principal(oauth_broker: OAuthBroker) -> None:
    topic = unique_topic("oauth")
    values = [f"o{i}".encode() for i in range(20)]
    producer = Producer(oauth_broker.confluent())
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0
    assert consume_confluent(oauth_broker.confluent(), topic, 20) == values
    assert oauth_broker.lines("authenticated as User:alice (OAUTHBEARER)")


def test_another_principal_is_authenticated_and_then_denied_by_the_acls(oauth_broker: OAuthBroker) -> None:
    producer = Producer({**oauth_broker.confluent("mallory"), "message.timeout.ms": 10_000})
    errors: list[KafkaException] = []
    producer.produce(unique_topic("oauth"), b"x", partition=0, on_delivery=lambda e, _: errors.append(e))
    producer.flush(30)
    assert [e.code() for e in errors if e is not None]  # TOPIC_AUTHORIZATION_FAILED (or the timeout)
    assert oauth_broker.lines("authenticated as User:mallory (OAUTHBEARER)")
    assert oauth_broker.lines("DENIED User:mallory")


def test_kcat(oauth_broker: OAuthBroker) -> None:
    settings = {k: v for k, v in oauth_broker.confluent().items() if k != "bootstrap.servers"}
    topic = unique_topic("oauth")
    assert kcat_round_trip(oauth_broker.bootstrap, topic, settings) == [f"kc{i}" for i in range(5)]


class _KafkaPythonTokens(AbstractTokenProvider):
    def token(self) -> str:
        return unsecured_jws("alice", time.time_ns() // 1_000_000, scope=("kafka",))


class _AioTokens(AioTokenProvider):
    async def token(self) -> str:
        return unsecured_jws("alice", time.time_ns() // 1_000_000, scope=("kafka",))


@pytest.mark.parametrize(
    ("round_trip", "tokens", "prefix"),
    [(kafka_python_round_trip, _KafkaPythonTokens, "k"), (aiokafka_round_trip, _AioTokens, "a")],
    ids=["kafka-python", "aiokafka"],
)
def test_python_clients_with_a_token_provider(
    oauth_broker: OAuthBroker, round_trip: Callable[..., list[bytes]], tokens: type, prefix: str
) -> None:
    values = round_trip(
        oauth_broker.bootstrap,
        unique_topic("oauth"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=tokens(),
    )
    assert values == [f"{prefix}{i}".encode() for i in range(10)]


def test_two_phase_commit_client(oauth_broker: OAuthBroker) -> None:
    conf = oauth_broker.confluent()
    with TwoPhaseClient(conf["bootstrap.servers"], config=conf, timeout=10) as client:
        assert client.supported()


def _raw_exchange(broker: OAuthBroker, token: str) -> tuple[Any, RawClient]:
    raw = RawClient(broker.bootstrap)
    assert raw.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest("OAUTHBEARER")).error_code == 0
    answer = raw.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(client_initial_response(token)))
    return answer, raw


@pytest.mark.parametrize(
    ("token", "challenge", "reason"),
    [
        (
            unsecured_jws("alice", int(time.time() * 1000), scope=("other",)),
            b'{"status":"insufficient_scope","scope":"kafka"}',
            "scope lacks kafka",
        ),
        (
            unsecured_jws(
                "alice", int(time.time() * 1000) - 7_200_000, scope=("kafka",)
            ),  # expired an hour ago
            b'{"status":"invalid_token"}',
            "expired",
        ),
        (
            unsecured_jws("alice", int(time.time() * 1000), scope=("kafka",)) + "c2lnbmVk",  # a signature
            b'{"status":"invalid_token"}',
            "empty signature",
        ),
    ],
)
def test_a_refused_token_gets_kafkas_error_challenge_then_fails(
    oauth_broker: OAuthBroker, token: str, challenge: bytes, reason: str
) -> None:
    answer, raw = _raw_exchange(oauth_broker, token)
    try:
        assert (answer.error_code, bytes(answer.auth_bytes)) == (0, challenge)
        final = raw.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(b"\x01"))
        assert final.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert reason in final.error_message
        assert raw.is_closed_by_peer()
    finally:
        raw.close()


def test_an_authorization_id_other_than_the_principal_is_refused(oauth_broker: OAuthBroker) -> None:
    raw = RawClient(oauth_broker.bootstrap)
    try:
        raw.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest("OAUTHBEARER"))
        token = unsecured_jws("mallory", int(time.time() * 1000), scope=("kafka",))
        answer = raw.request(
            ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(client_initial_response(token, "alice"))
        )
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "authorization id (alice)" in answer.error_message
    finally:
        raw.close()


def test_librdkafka_reports_the_refusal(oauth_broker: OAuthBroker) -> None:
    errors: list[str] = []
    conf = {**oauth_broker.confluent(scope="other"), "error_cb": lambda e: errors.append(str(e))}
    producer = Producer(conf)
    deadline = time.monotonic() + 30
    while not any("scope lacks kafka" in e for e in errors):
        assert time.monotonic() < deadline, errors
        producer.poll(0.2)
