"""Several listeners at once (Kafka's `listeners` / `advertised.listeners` / protocol map): each client is
told the endpoint of the listener it came in on; a non-loopback PLAINTEXT listener warns at start."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer

from exactly.testing.processes import BrokerProcess, free_port


def test_each_listener_advertises_its_own_endpoint(tmp_path: Path) -> None:
    plain, local = free_port(), free_port()
    broker = BrokerProcess(
        tmp_path / "data",
        f"listeners=PLAINTEXT://127.0.0.1:{plain},LOCAL://0.0.0.0:{local}",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,LOCAL:PLAINTEXT",
        f"advertised.listeners=LOCAL://localhost:{local}",
        port=plain,
    ).start()
    try:
        for port, host in ((plain, "127.0.0.1"), (local, "localhost")):
            brokers = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=20).brokers
            assert [(b.host, b.port) for b in brokers.values()] == [(host, port)]
        # a client that only knows the second listener produces and reads back through it
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{local}"})
        for i in range(10):
            producer.produce("via-local", f"r{i}".encode(), partition=0)
        assert producer.flush(30) == 0
        consumer = KafkaConsumer(
            "via-local",
            bootstrap_servers=f"127.0.0.1:{local}",
            auto_offset_reset="earliest",
            consumer_timeout_ms=10_000,
        )
        values = [m.value for m in consumer]
        consumer.close()
        assert values == [f"r{i}".encode() for i in range(10)]
        log = broker.log()
        assert f"listening on PLAINTEXT://127.0.0.1:{plain} (PLAINTEXT)" in log
        assert f"listening on LOCAL://0.0.0.0:{local} (PLAINTEXT)" in log
        warnings = [line for line in log.splitlines() if "without authentication" in line]
        assert len(warnings) == 1
        assert "WARNING" in warnings[0]
        assert "listener LOCAL" in warnings[0]
    finally:
        broker.stop()


def test_describe_configs_reports_the_listeners_with_their_bound_ports(tmp_path: Path) -> None:
    plain, local = free_port(), free_port()
    broker = BrokerProcess(
        tmp_path / "data",
        f"listeners=PLAINTEXT://127.0.0.1:{plain},LOCAL://127.0.0.1:{local}",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,LOCAL:PLAINTEXT",
        port=plain,
    ).start()
    try:
        from confluent_kafka.admin import ConfigResource, ResourceType

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        resource = ConfigResource(ResourceType.BROKER, "0")
        configs = admin.describe_configs([resource])[resource].result(timeout=20)
        assert configs["listeners"].value == f"PLAINTEXT://127.0.0.1:{plain},LOCAL://127.0.0.1:{local}"
        assert configs["advertised.listeners"].value == configs["listeners"].value
        assert "warning" not in broker.log().lower()
    finally:
        broker.stop()


def serve_errors(tmp_path: Path, *args: str) -> list[str]:
    """`exactly serve ARGS`, expected to refuse: its `error:` lines (exit code 1, no traceback)."""
    result = subprocess.run(
        [sys.executable, "-m", "exactly", "serve", "--data-dir", str(tmp_path / "data"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


def test_a_sasl_listener_with_an_unbuilt_mechanism_is_refused_in_one_line(tmp_path: Path) -> None:
    listeners = f"listeners=PLAINTEXT://127.0.0.1:{free_port()},SASL_SSL://127.0.0.1:{free_port()}"
    errors = serve_errors(
        tmp_path, "--set", listeners, "--set", "listener.name.sasl_ssl.sasl.enabled.mechanisms=GSSAPI"
    )
    assert errors == [
        "error: the broker stopped: listener SASL_SSL: sasl.enabled.mechanisms GSSAPI: exactly supports "
        "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER"
    ]


def test_a_port_in_use_is_refused_in_one_line(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        errors = serve_errors(tmp_path, "--listen", f"127.0.0.1:{port}")
    assert errors == [
        f"error: the broker stopped: listener PLAINTEXT cannot listen on 127.0.0.1:{port}: "
        "Address already in use"
    ]
