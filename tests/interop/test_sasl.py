"""SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) over SASL_PLAINTEXT with the real clients, and raw sockets
for what clients never send (requests before authentication, garbage tokens, unknown mechanisms).

One broker serves three listeners:
- SASL_PLAINTEXT  every mechanism; PLAIN checks the users' SCRAM credentials (no JAAS users configured);
- JAAS            SASL_PLAINTEXT, PLAIN only, users from listener.name.jaas.plain.sasl.jaas.config;
- PLAINTEXT       on loopback: the admin client that creates the SCRAM users.
"""

from __future__ import annotations

import contextlib
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramMechanism,
    UserScramCredentialDeletion,
)

from exactly.client.twopc import TwoPhaseClient, TwoPhaseCommitError
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from exactly.protocol.messages.metadata import MetadataRequest
from exactly.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from exactly.protocol.messages.sasl_handshake import SaslHandshakeRequest
from exactly.testing.processes import BrokerProcess, free_port
from tests.interop.client import RawClient as _RawClient
from tests.interop.support import add_scram_users, running_broker
from tests.interop.tls_support import (
    aiokafka_round_trip,
    consume_confluent,
    kafka_python_round_trip,
    kcat_round_trip,
    make_tls_files,
    ssl_settings,
    transactions_confluent,
    unique_topic,
    wait_for,
)

USERS = {"alice": "alice-secret-1", "bob": "bob-secret-2"}
JAAS_USERS = {"carol": "carol-jaas-pw"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="carol" password="carol-jaas-pw" user_carol="carol-jaas-pw";'
)


@dataclass(frozen=True)
class SaslBroker:
    proc: BrokerProcess
    sasl_port: int
    jaas_port: int
    plain_port: int

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def plain_bootstrap(self) -> str:
        return f"127.0.0.1:{self.plain_port}"

    def confluent(self, mechanism: str, user: str = "alice", password: str | None = None) -> dict[str, str]:
        return {
            "bootstrap.servers": self.sasl_bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": USERS.get(user, "") if password is None else password,
        }

    def log_lines(self, text: str) -> list[str]:
        return [line for line in self.proc.full_log().splitlines() if text in line]


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    root = tmp_path_factory.mktemp("sasl")
    sasl_port, jaas_port, plain_port = free_port(), free_port(), free_port()
    settings = [
        f"listeners=SASL_PLAINTEXT://127.0.0.1:{sasl_port},JAAS://127.0.0.1:{jaas_port},"
        f"PLAINTEXT://127.0.0.1:{plain_port}",
        "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,JAAS:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "listener.name.jaas.sasl.enabled.mechanisms=PLAIN",
        f"listener.name.jaas.plain.sasl.jaas.config={JAAS}",
        "group.initial.rebalance.delay.ms=0",
    ]
    with running_broker(root / "data", *settings, port=plain_port) as proc:
        broker = SaslBroker(proc, sasl_port, jaas_port, plain_port)
        add_scram_users(broker.plain_bootstrap, USERS, ScramMechanism.SCRAM_SHA_256)
        add_scram_users(broker.plain_bootstrap, USERS, ScramMechanism.SCRAM_SHA_512, iterations=4096)
        yield broker


@contextlib.contextmanager
def RawClient(bootstrap: str) -> Iterator[_RawClient]:
    raw = _RawClient(bootstrap)
    try:
        yield raw
    finally:
        raw.close()


def _produce_confluent(conf: dict[str, str], topic: str, values: list[bytes]) -> None:
    producer = Producer(conf)
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_confluent_kafka_produces_and_consumes(sasl_broker: SaslBroker, mechanism: str) -> None:
    topic = unique_topic("sasl")
    before = len(sasl_broker.log_lines(f"authenticated as User:bob ({mechanism})"))
    values = [f"{mechanism}-{i}".encode() for i in range(20)]
    _produce_confluent(sasl_broker.confluent(mechanism, "bob"), topic, values)
    assert consume_confluent(sasl_broker.confluent(mechanism, "bob"), topic, 20) == values
    lines = sasl_broker.log_lines(f"authenticated as User:bob ({mechanism})")
    assert len(lines) > before
    assert all(" INFO " in line and "connection " in line for line in lines)


def test_plain_against_jaas_users(sasl_broker: SaslBroker) -> None:
    topic = unique_topic("sasl")
    conf = {
        "bootstrap.servers": f"127.0.0.1:{sasl_broker.jaas_port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "carol",
        "sasl.password": JAAS_USERS["carol"],
    }
    _produce_confluent(conf, topic, [b"jaas"])
    assert consume_confluent(conf, topic, 1) == [b"jaas"]
    assert sasl_broker.log_lines("authenticated as User:carol (PLAIN)")
    # The JAAS listener has its own users: alice's SCRAM password is not a PLAIN password there.
    with RawClient(f"127.0.0.1:{sasl_broker.jaas_port}") as raw:
        assert raw.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest("PLAIN")).error_code == 0
        answer = raw.request(
            ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(b"\0alice\0" + b"alice-secret-1")
        )
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    # ... and it offers PLAIN only.
    with RawClient(f"127.0.0.1:{sasl_broker.jaas_port}") as raw:
        answer = raw.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest("SCRAM-SHA-256"))
        assert (answer.error_code, answer.mechanisms) == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, ["PLAIN"])


def test_kafka_python_scram_sha_512(sasl_broker: SaslBroker) -> None:
    values = kafka_python_round_trip(
        sasl_broker.sasl_bootstrap,
        unique_topic("sasl"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="alice",
        sasl_plain_password=USERS["alice"],
    )
    assert values == [f"k{i}".encode() for i in range(10)]


def test_aiokafka_scram_sha_256(sasl_broker: SaslBroker) -> None:
    values = aiokafka_round_trip(
        sasl_broker.sasl_bootstrap,
        unique_topic("sasl"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="bob",
        sasl_plain_password=USERS["bob"],
    )
    assert values == [f"a{i}".encode() for i in range(10)]


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (.ci/run installs it)")
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_kcat(sasl_broker: SaslBroker, mechanism: str) -> None:
    conf = sasl_broker.confluent(mechanism)
    settings = {k: conf[k] for k in ("security.protocol", "sasl.mechanism", "sasl.username", "sasl.password")}
    lines = kcat_round_trip(sasl_broker.sasl_bootstrap, unique_topic("sasl"), settings)
    assert lines == [f"kc{i}" for i in range(5)]


def test_transaction_over_scram(sasl_broker: SaslBroker) -> None:
    values = transactions_confluent(sasl_broker.confluent("SCRAM-SHA-256"), unique_topic("sasl"))
    assert values == [*(f"committed-{i}".encode() for i in range(5)), b"last"]


def _authenticate_plain(raw: RawClient, user: str, password: str) -> object:
    assert raw.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest("PLAIN")).error_code == 0
    return raw.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(f"\0{user}\0{password}".encode()))


@pytest.mark.parametrize(("user", "password"), [("alice", "WRONG-pw-123"), ("mallory", "WRONG-pw-456")])
def test_wrong_password_and_unknown_user(sasl_broker: SaslBroker, user: str, password: str) -> None:
    with RawClient(sasl_broker.sasl_bootstrap) as raw:
        started = time.monotonic()
        answer = _authenticate_plain(raw, user, password)
        took = time.monotonic() - started
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED  # type: ignore[attr-defined]
        assert answer.error_message == "Authentication failed: Invalid username or password"  # type: ignore[attr-defined]
        assert took >= 0.1  # connection.failed.authentication.delay.ms
        assert raw.is_closed_by_peer()
    wait_for(
        lambda: sasl_broker.log_lines(f"authentication failed (PLAIN, user '{user}': invalid credentials)")
    )
    assert password not in sasl_broker.proc.full_log()


def test_confluent_kafka_sees_the_authentication_failure(sasl_broker: SaslBroker) -> None:
    errors: list[str] = []
    conf = {**sasl_broker.confluent("SCRAM-SHA-256", "alice", "not-her-password"), "error_cb": errors.append}
    producer = Producer(conf)
    producer.poll(0)
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors
    expected = "Authentication failed during authentication due to invalid credentials with SASL mechanism"
    assert f"{expected} SCRAM-SHA-256" in str(errors[0])
    assert "not-her-password" not in sasl_broker.proc.full_log()


def test_unknown_mechanism_gets_the_enabled_list(sasl_broker: SaslBroker) -> None:
    with RawClient(sasl_broker.sasl_bootstrap) as raw:
        answer = raw.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest("GSSAPI"))
        assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert answer.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert raw.is_closed_by_peer()


def test_api_versions_then_handshake_is_allowed_and_advertises_sasl(sasl_broker: SaslBroker) -> None:
    with RawClient(sasl_broker.sasl_bootstrap) as raw:
        versions = raw.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("raw", "1"))
        keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert keys[ApiKey.SASL_HANDSHAKE] == (0, 1)
        assert keys[ApiKey.SASL_AUTHENTICATE] == (0, 2)
        answer = _authenticate_plain(raw, "alice", USERS["alice"])
        assert answer.error_code == 0  # type: ignore[attr-defined]
        metadata = raw.request(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
        assert metadata.brokers


@pytest.mark.parametrize("after_handshake", [False, True])
def test_a_request_before_authentication_closes_the_connection(
    sasl_broker: SaslBroker, after_handshake: bool
) -> None:
    with RawClient(sasl_broker.sasl_bootstrap) as raw:
        if after_handshake:
            assert (
                raw.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest("SCRAM-SHA-256")).error_code == 0
            )
        with pytest.raises(ConnectionError):
            raw.request(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
    state = "authenticating" if after_handshake else "waiting for SaslHandshake"
    wait_for(lambda: sasl_broker.log_lines(f"(bad request: ILLEGAL_SASL_STATE: METADATA v12 while {state})"))


def test_garbage_tokens_and_frames_are_refused_and_others_are_served(sasl_broker: SaslBroker) -> None:
    with RawClient(sasl_broker.sasl_bootstrap) as raw:
        assert raw.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest("SCRAM-SHA-512")).error_code == 0
        answer = raw.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(b"\xff\xfe garbage \x00"))
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert raw.is_closed_by_peer()
    with RawClient(sasl_broker.sasl_bootstrap) as raw:  # a SaslAuthenticate frame that does not decode
        raw.send_frame(struct.pack(">hhi", ApiKey.SASL_AUTHENTICATE, 2, 1) + b"\x07\xff\xff\xff")
        assert raw.is_closed_by_peer()
    # SaslAuthenticate before SaslHandshake
    with RawClient(sasl_broker.sasl_bootstrap) as raw, pytest.raises(ConnectionError):
        raw.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(b"\0alice\0x"))
    topic = unique_topic("sasl")
    _produce_confluent(sasl_broker.confluent("SCRAM-SHA-512"), topic, [b"still-serving"])
    assert consume_confluent(sasl_broker.confluent("SCRAM-SHA-512"), topic, 1) == [b"still-serving"]


def test_raw_token_framing_of_handshake_v0_is_refused(sasl_broker: SaslBroker) -> None:
    with RawClient(sasl_broker.sasl_bootstrap) as raw, pytest.raises(ConnectionError):
        raw.request(ApiKey.SASL_HANDSHAKE, 0, SaslHandshakeRequest("PLAIN"))
    wait_for(
        lambda: sasl_broker.log_lines("SaslHandshake v0 (raw tokens without SaslAuthenticate, not built)")
    )


def test_sasl_requests_on_plaintext_are_illegal(sasl_broker: SaslBroker) -> None:
    with RawClient(sasl_broker.plain_bootstrap) as raw:
        assert (
            raw.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest("PLAIN")).error_code
            == ErrorCode.ILLEGAL_SASL_STATE
        )


def test_scram_credential_admin_errors(sasl_broker: SaslBroker) -> None:
    with RawClient(sasl_broker.plain_bootstrap) as raw:
        answer = raw.request(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            0,
            AlterUserScramCredentialsRequest(
                deletions=[ScramCredentialDeletion("nobody", 1), ScramCredentialDeletion("dup", 1)],
                upsertions=[
                    ScramCredentialUpsertion("few", 1, 1000, b"salt", b"x" * 32),
                    ScramCredentialUpsertion("many", 1, 20000, b"salt", b"x" * 32),
                    ScramCredentialUpsertion("mech", 3, 8192, b"salt", b"x" * 32),
                    ScramCredentialUpsertion("dup", 1, 8192, b"salt", b"x" * 32),
                    ScramCredentialUpsertion("", 1, 8192, b"salt", b"x" * 32),
                ],
            ),
        )
        got = {r.user: (r.error_code, r.error_message) for r in answer.results}
        assert got == {
            "nobody": (
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            ),
            "dup": (
                ErrorCode.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            ),
            "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
            "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
            "mech": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
            "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        }
        described = raw.request(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
            0,
            DescribeUserScramCredentialsRequest([UserName("alice"), UserName("nobody"), UserName("few")]),
        )
        got_d = {
            r.user: (r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in described.results
        }
        assert got_d == {
            "alice": (0, [(1, 8192), (2, 4096)]),
            "nobody": (ErrorCode.RESOURCE_NOT_FOUND, []),
            "few": (ErrorCode.RESOURCE_NOT_FOUND, []),
        }


def test_deleted_credentials_no_longer_authenticate(sasl_broker: SaslBroker) -> None:
    admin = AdminClient({"bootstrap.servers": sasl_broker.plain_bootstrap})
    add_scram_users(sasl_broker.plain_bootstrap, {"dave": "dave-pw-1"}, ScramMechanism.SCRAM_SHA_256)
    with RawClient(sasl_broker.sasl_bootstrap) as raw:
        assert _authenticate_plain(raw, "dave", "dave-pw-1").error_code == 0  # type: ignore[attr-defined]
    for future in admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)]
    ).values():
        future.result(30)
    (described,) = admin.describe_user_scram_credentials(["dave"]).values()
    with pytest.raises(Exception, match="nonexistent"):
        described.result(30)
    with RawClient(sasl_broker.sasl_bootstrap) as raw:
        answer = _authenticate_plain(raw, "dave", "dave-pw-1")
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED  # type: ignore[attr-defined]


def test_credentials_survive_kill_9(tmp_path: Path) -> None:
    sasl_port, plain_port = free_port(), free_port()
    settings = [
        f"listeners=SASL_PLAINTEXT://127.0.0.1:{sasl_port},PLAINTEXT://127.0.0.1:{plain_port}",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
    ]
    with running_broker(tmp_path / "data", *settings, port=plain_port) as proc:
        add_scram_users(f"127.0.0.1:{plain_port}", {"erin": "erin-pw-9"}, ScramMechanism.SCRAM_SHA_512)
        proc.kill()
        proc.restart()
        stored = (tmp_path / "data" / "__cluster_metadata.log").read_text()
        assert "erin" in stored
        assert "erin-pw-9" not in stored
        conf = {
            "bootstrap.servers": f"127.0.0.1:{sasl_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "erin",
            "sasl.password": "erin-pw-9",
        }
        topic = unique_topic("sasl")
        _produce_confluent(conf, topic, [b"after-kill"])
        assert consume_confluent(conf, topic, 1) == [b"after-kill"]
        assert "authenticated as User:erin (SCRAM-SHA-512)" in proc.full_log()


def test_scram_over_sasl_ssl(tmp_path: Path) -> None:
    files = make_tls_files(tmp_path / "certs")
    ssl_port, plain_port = free_port(), free_port()
    settings = [
        f"listeners=SASL_SSL://127.0.0.1:{ssl_port},PLAINTEXT://127.0.0.1:{plain_port}",
        *ssl_settings(files, client_auth="none"),
    ]
    with running_broker(tmp_path / "data", *settings, port=plain_port) as proc:
        add_scram_users(f"127.0.0.1:{plain_port}", {"frank": "frank-pw-7"}, ScramMechanism.SCRAM_SHA_512)
        conf = {
            "bootstrap.servers": f"127.0.0.1:{ssl_port}",
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(files.ca),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "frank",
            "sasl.password": "frank-pw-7",
        }
        topic = unique_topic("sasl")
        _produce_confluent(conf, topic, [b"over-tls"])
        assert consume_confluent(conf, topic, 1) == [b"over-tls"]
        assert "authenticated as User:frank (SCRAM-SHA-512)" in proc.full_log()
        errors: list[object] = []
        producer = Producer({**conf, "sasl.password": "wrong-pw-7", "error_cb": errors.append})
        wait_for(lambda: producer.poll(0.2) is not None and errors)
        assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in str(errors[0])


def test_reauthentication_and_expiry(tmp_path: Path) -> None:
    sasl_port, plain_port = free_port(), free_port()
    settings = [
        f"listeners=SASL_PLAINTEXT://127.0.0.1:{sasl_port},PLAINTEXT://127.0.0.1:{plain_port}",
        "connections.max.reauth.ms=1500",
    ]
    with running_broker(tmp_path / "data", *settings, port=plain_port) as proc:
        add_scram_users(f"127.0.0.1:{plain_port}", {"gina": "gina-pw-3"}, ScramMechanism.SCRAM_SHA_256)
        conf = {
            "bootstrap.servers": f"127.0.0.1:{sasl_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "gina",
            "sasl.password": "gina-pw-3",
        }
        producer = Producer(conf)
        topic = unique_topic("sasl")
        sent = 0
        # librdkafka re-authenticates its connections before each 1.5 s session ends; keep producing
        # until the broker has logged two re-authentications, every record delivered.
        deadline = time.monotonic() + 30
        while proc.full_log().count("re-authenticated as User:gina") < 2:
            assert time.monotonic() < deadline, "no re-authentication"
            producer.produce(topic, f"r{sent}".encode(), partition=0)
            sent += 1
            assert producer.flush(10) == 0
        assert consume_confluent(conf, topic, sent) == [f"r{i}".encode() for i in range(sent)]
        assert "after the session expired" not in proc.full_log()
        # A client that does not re-authenticate is closed at its next request after the lifetime.
        with RawClient(f"127.0.0.1:{sasl_port}") as raw:
            raw.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest("PLAIN"))
            answer = raw.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(b"\0gina\0gina-pw-3"))
            assert (answer.error_code, answer.session_lifetime_ms) == (0, 1500)
            assert raw.request(ApiKey.METADATA, 12, MetadataRequest(topics=[])).brokers
            expiry = time.monotonic() + 1.6
            wait_for(lambda: time.monotonic() > expiry)
            with pytest.raises(ConnectionError):
                raw.request(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
        wait_for(lambda: "METADATA v12 after the session expired" in proc.full_log())


def test_unknown_enabled_mechanism_is_one_error_line(tmp_path: Path) -> None:
    port = free_port()
    out = subprocess.run(
        [
            *(sys.executable, "-m", "exactly", "serve", "--data-dir", str(tmp_path / "d")),
            "--set",
            f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
            "--set",
            "sasl.enabled.mechanisms=GSSAPI,PLAIN",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out.stderr
    assert "sasl.enabled.mechanisms GSSAPI: exactly supports PLAIN, SCRAM-SHA-256, SCRAM-SHA-512" in errors[0]
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_two_phase_commit_client_authenticates(sasl_broker: SaslBroker, mechanism: str) -> None:
    """exactly's own 2PC client (the Spark sink's) takes the librdkafka settings and authenticates."""
    conf = sasl_broker.confluent(mechanism, "bob")
    with TwoPhaseClient(conf["bootstrap.servers"], config=conf, timeout=10) as client:
        assert client.supported()
        assert client.list_prepared("no-such-query") == ([], [])
    assert sasl_broker.log_lines(f"authenticated as User:bob ({mechanism})")
    wrong = {**conf, "sasl.password": "WRONG-pw-2pc"}
    started = time.monotonic()
    with (
        TwoPhaseClient(conf["bootstrap.servers"], config=wrong, timeout=10) as client,
        pytest.raises(TwoPhaseCommitError) as refused,
    ):
        client.supported()
    assert refused.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert time.monotonic() - started < 5  # refused at once, not retried until the timeout
