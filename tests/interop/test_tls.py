"""TLS and mutual TLS listeners with the real clients (confluent-kafka, kafka-python, aiokafka, kcat).

One broker serves three listeners at once:
- SSL        mutual TLS required, principal = the certificate's DN (DEFAULT rule), an encrypted key store
             opened with ssl.key.password;
- MAPPED     SSL with listener-prefixed overrides: client auth `requested`, mapping rule CN -> upper case;
- PLAINTEXT  on loopback, for local tools.
The broker logs one INFO line per client authenticated by its certificate; the tests read the principal there.
"""

from __future__ import annotations

import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiokafka.helpers import create_ssl_context
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from exactly.testing.processes import BrokerProcess, free_port
from tests.interop.support import running_broker
from tests.interop.tls_support import (
    ClientCert,
    TlsFiles,
    aiokafka_round_trip,
    confluent_ssl,
    consume_confluent,
    kafka_python_round_trip,
    kcat_round_trip,
    make_tls_files,
    ssl_settings,
    transactions_confluent,
    unique_topic,
    wait_for,
)

KEY_PASSWORD = "s3cret-pw"


@dataclass(frozen=True)
class TlsBroker:
    proc: BrokerProcess
    files: TlsFiles
    alice: ClientCert
    ssl_port: int
    mapped_port: int
    plain_port: int

    @property
    def ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    def confluent(self, client: ClientCert | None = None, port: int | None = None) -> dict[str, str]:
        return {
            "bootstrap.servers": f"127.0.0.1:{port or self.ssl_port}",
            **confluent_ssl(self.files, client if client is not None else self.alice),
        }


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    root = tmp_path_factory.mktemp("tls")
    files = make_tls_files(root / "certs")
    ssl_port, mapped_port, plain_port = free_port(), free_port(), free_port()
    key_store = files.encrypted_server_key_store(KEY_PASSWORD)
    settings = [
        f"listeners=SSL://127.0.0.1:{ssl_port},MAPPED://127.0.0.1:{mapped_port},"
        f"PLAINTEXT://127.0.0.1:{plain_port}",
        "listener.security.protocol.map=SSL:SSL,MAPPED:SSL,PLAINTEXT:PLAINTEXT",
        *ssl_settings(files, "required", key_store),
        f"ssl.key.password={KEY_PASSWORD}",
        "listener.name.mapped.ssl.client.auth=requested",
        "listener.name.mapped.ssl.principal.mapping.rules=RULE:^CN=([^,]*),OU=x,.*$/$1/U,DEFAULT",
        "group.initial.rebalance.delay.ms=0",
    ]
    with running_broker(root / "data", *settings, port=plain_port) as proc:
        yield TlsBroker(proc, files, files.client("alice"), ssl_port, mapped_port, plain_port)


def _log_lines(broker: TlsBroker, text: str) -> list[str]:
    return [line for line in broker.proc.full_log().splitlines() if text in line]


def test_confluent_kafka_produces_and_consumes_with_its_certificate(tls_broker: TlsBroker) -> None:
    topic = unique_topic("tls")
    producer = Producer(tls_broker.confluent())
    for i in range(20):
        producer.produce(topic, f"c{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    assert consume_confluent(tls_broker.confluent(), topic, 20) == [f"c{i}".encode() for i in range(20)]
    lines = _log_lines(tls_broker, "on listener SSL authenticated as")
    assert lines
    assert all(line.endswith("authenticated as User:CN=alice,OU=x,O=y") for line in lines), lines
    assert all(" INFO " in line for line in lines)


def test_kafka_python_over_tls(tls_broker: TlsBroker) -> None:
    values = kafka_python_round_trip(
        tls_broker.ssl_bootstrap,
        unique_topic("tls"),
        security_protocol="SSL",
        ssl_cafile=str(tls_broker.files.ca),
        ssl_certfile=str(tls_broker.alice.cert),
        ssl_keyfile=str(tls_broker.alice.key),
    )
    assert values == [f"k{i}".encode() for i in range(10)]


def test_aiokafka_over_tls(tls_broker: TlsBroker) -> None:
    context = create_ssl_context(
        cafile=str(tls_broker.files.ca),
        certfile=str(tls_broker.alice.cert),
        keyfile=str(tls_broker.alice.key),
    )
    values = aiokafka_round_trip(
        tls_broker.ssl_bootstrap, unique_topic("tls"), security_protocol="SSL", ssl_context=context
    )
    assert values == [f"a{i}".encode() for i in range(10)]


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (.ci/run installs it)")
def test_kcat_over_tls(tls_broker: TlsBroker) -> None:
    settings = {
        "security.protocol": "SSL",
        "ssl.ca.location": str(tls_broker.files.ca),
        "ssl.certificate.location": str(tls_broker.alice.cert),
        "ssl.key.location": str(tls_broker.alice.key),
    }
    lines = kcat_round_trip(tls_broker.ssl_bootstrap, unique_topic("tls"), settings)
    assert lines == [f"kc{i}" for i in range(5)]


def test_transactions_over_tls(tls_broker: TlsBroker) -> None:
    values = transactions_confluent(tls_broker.confluent(), unique_topic("tls"))
    assert values == [*(f"committed-{i}".encode() for i in range(5)), b"last"]


def test_a_client_without_a_certificate_is_refused_and_others_are_served(tls_broker: TlsBroker) -> None:
    failures_before = tls_broker.proc.full_log().count("on listener SSL failed")
    admin = AdminClient({**tls_broker.confluent(), "ssl.certificate.location": "", "ssl.key.location": ""})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    wait_for(lambda: tls_broker.proc.full_log().count("on listener SSL failed") > failures_before)
    failed = [line for line in tls_broker.proc.full_log().splitlines() if "on listener SSL failed" in line]
    assert all(" INFO " in line and "TLS handshake with 127.0.0.1:" in line for line in failed)
    assert "Traceback" not in tls_broker.proc.full_log()
    # one with its certificate is served meanwhile
    assert AdminClient(tls_broker.confluent()).list_topics(timeout=20).brokers


def test_a_plaintext_client_on_the_ssl_port_is_closed(tls_broker: TlsBroker) -> None:
    # a client that connects and says nothing does not hold up anyone (its handshake times out later)
    silent = socket.create_connection(("127.0.0.1", tls_broker.ssl_port))
    try:
        # ApiVersions v0 request, in the clear
        header = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
        with socket.create_connection(("127.0.0.1", tls_broker.ssl_port), timeout=20) as plain:
            plain.sendall(struct.pack(">i", len(header)) + header)
            try:
                data = plain.recv(4096)
                while data and not data.startswith(b"\x00\x00"):  # a TLS alert may precede the close
                    data = plain.recv(4096)
            except ConnectionResetError:
                data = b""
            assert data == b""
        wait_for(lambda: "failed: " in tls_broker.proc.full_log())
        topic = unique_topic("tls")
        producer = Producer(tls_broker.confluent())
        producer.produce(topic, b"still-served", partition=0)
        assert producer.flush(30) == 0
        assert consume_confluent(tls_broker.confluent(), topic, 1) == [b"still-served"]
    finally:
        silent.close()


def test_listener_overrides_requested_auth_and_mapping_rules(tls_broker: TlsBroker) -> None:
    bob = tls_broker.files.client("bob")
    topic = unique_topic("tls")
    # without a certificate on MAPPED (client auth requested): served as ANONYMOUS
    anonymous = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{tls_broker.mapped_port}",
            **confluent_ssl(tls_broker.files, None),
        }
    )
    anonymous.produce(topic, b"anonymous", partition=0)
    assert anonymous.flush(30) == 0
    # with one: the listener's own rule maps CN=bob,OU=x,O=y to BOB
    named = Producer(tls_broker.confluent(bob, tls_broker.mapped_port))
    named.produce(topic, b"bob", partition=0)
    assert named.flush(30) == 0
    wait_for(lambda: "on listener MAPPED authenticated as User:BOB" in tls_broker.proc.full_log())
    mapped = _log_lines(tls_broker, "on listener MAPPED authenticated")
    assert all(line.endswith("User:BOB") for line in mapped), mapped
    # a plaintext client reads both through the loopback PLAINTEXT listener
    plain = {"bootstrap.servers": f"127.0.0.1:{tls_broker.plain_port}"}
    assert sorted(consume_confluent(plain, topic, 2)) == [b"anonymous", b"bob"]


def test_describe_configs_hides_the_key_password(tls_broker: TlsBroker) -> None:
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{tls_broker.plain_port}"})
    resource = ConfigResource(ResourceType.BROKER, "0")
    configs = admin.describe_configs([resource])[resource].result(timeout=20)
    password = configs["ssl.key.password"]
    assert password.is_sensitive
    assert password.value is None
    assert configs["ssl.client.auth"].value == "required"
    assert configs["ssl.keystore.type"].value == "PEM"
    assert configs["ssl.enabled.protocols"].value == "TLSv1.2,TLSv1.3"


def _serve_and_fail(tmp_path: Path, *settings: str) -> list[str]:
    listeners = f"listeners=SSL://127.0.0.1:{free_port()}"
    args = [sys.executable, "-m", "exactly", "serve", "--data-dir", str(tmp_path / "data")]
    args += ["--set", listeners]
    for item in settings:
        args += ["--set", item]
    result = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


def test_a_wrong_key_password_is_one_error_line_at_start(tmp_path: Path) -> None:
    files = make_tls_files(tmp_path / "certs")
    key_store = files.encrypted_server_key_store(KEY_PASSWORD)
    errors = _serve_and_fail(tmp_path, *ssl_settings(files, key_store=key_store), "ssl.key.password=wrong")
    assert errors == [
        "error: the broker stopped: listener SSL: ssl.key.password does not decrypt the private key in "
        f"{key_store}"
    ]


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("ssl.keystore.type=JKS", "ssl.keystore.type JKS is not supported: exactly reads PEM key stores"),
        ("ssl.truststore.location=/nonexistent/ca.pem", "cannot read ssl.truststore.location /nonexistent"),
        ("ssl.principal.mapping.rules=RULE:a/b/Lx", "mapping.rules: Invalid rule: `RULE:a/b/Lx`"),
    ],
)
def test_bad_tls_settings_are_one_error_line(tmp_path: Path, setting: str, expected: str) -> None:
    files = make_tls_files(tmp_path / "certs")
    errors = _serve_and_fail(tmp_path, *ssl_settings(files), setting)
    assert len(errors) == 1
    assert expected in errors[0]


def test_a_wildcard_ssl_listener_without_client_auth_warns(tmp_path: Path) -> None:
    files = make_tls_files(tmp_path / "certs")
    open_port, mtls_port, plain = free_port(), free_port(), free_port()
    settings = [
        f"listeners=OPEN://0.0.0.0:{open_port},MTLS://0.0.0.0:{mtls_port},PLAINTEXT://127.0.0.1:{plain}",
        "listener.security.protocol.map=OPEN:SSL,MTLS:SSL,PLAINTEXT:PLAINTEXT",
        *ssl_settings(files, "none"),
        "listener.name.mtls.ssl.client.auth=required",
    ]
    with running_broker(tmp_path / "data", *settings, port=plain) as proc:
        warnings = [line for line in proc.full_log().splitlines() if "WARNING" in line]
    assert len(warnings) == 1, warnings
    assert "listener OPEN accepts connections from other machines without client auth" in warnings[0]
    assert "(ssl.client.auth=none)" in warnings[0]


@pytest.mark.slow
def test_a_new_key_store_is_used_without_a_restart(tmp_path: Path) -> None:
    files = make_tls_files(tmp_path / "certs")
    store = tmp_path / "server.pem"
    store.write_bytes(files.server.read_bytes())
    ssl_port, plain = free_port(), free_port()
    settings = [
        f"listeners=SSL://127.0.0.1:{ssl_port},PLAINTEXT://127.0.0.1:{plain}",
        *ssl_settings(files, "none", store),
    ]
    with running_broker(tmp_path / "data", *settings, port=plain) as proc:
        renewed = make_tls_files(tmp_path / "renewed")  # a new CA and a new server certificate
        conf = {"bootstrap.servers": f"127.0.0.1:{ssl_port}", **confluent_ssl(renewed, None)}
        with pytest.raises(KafkaException):
            AdminClient(conf).list_topics(timeout=3)
        store.write_bytes(renewed.server.read_bytes())
        deadline = time.monotonic() + 30
        while True:
            try:
                assert AdminClient(conf).list_topics(timeout=3).brokers
                break
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
        assert f"listener SSL: reloaded {store}" in proc.full_log()
        old = {"bootstrap.servers": f"127.0.0.1:{ssl_port}", **confluent_ssl(files, None)}
        with pytest.raises(KafkaException):
            AdminClient(old).list_topics(timeout=3)
