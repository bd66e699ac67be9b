"""The `exactly` source and sink over SASL_SSL: `kafka.security.protocol`, `kafka.sasl.*` and `kafka.ssl.*`
reach every client they create (the driver's admin client and preflight producer, the executors'
consumers and producers, and the two-phase commit client of guarantee=exactly-once).

The broker has two listeners: SASL_SSL (SCRAM-SHA-256, a server certificate from the tests' own CA),
the only address Spark is given, and PLAINTEXT on loopback for the test's own independent checks
(topics, records written and read back with confluent-kafka). The Spark user is created before the broker
starts (`exactly users add --data-dir`).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from exactly.testing.processes import BrokerProcess, free_port
from tests.interop.support import running_broker
from tests.interop.tls_support import TlsFiles, make_tls_files, ssl_settings
from tests.spark.kafka_io import create_topic, read_committed
from tests.spark.support import produce, unique_name

pytestmark = [pytest.mark.interop, pytest.mark.slow]

USER, PASSWORD = "spark-user", "spark-pw-42"


@dataclass(frozen=True)
class SecureBroker:
    proc: BrokerProcess
    files: TlsFiles
    secure_port: int
    plain_port: int

    @property
    def plain_bootstrap(self) -> str:
        return f"127.0.0.1:{self.plain_port}"

    def options(self, password: str = PASSWORD) -> dict[str, str]:
        """The Spark options of a client of the SASL_SSL listener (librdkafka's names after `kafka.`)."""
        return {
            "kafka.bootstrap.servers": f"127.0.0.1:{self.secure_port}",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.username": USER,
            "kafka.sasl.password": password,
            "kafka.ssl.ca.location": str(self.files.ca),
        }

    def authenticated(self) -> int:
        """How many connections authenticated as the Spark user on the SASL_SSL listener."""
        line = f"authenticated as User:{USER} (SCRAM-SHA-256)"
        return sum(line in entry for entry in self.proc.full_log().splitlines())


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    root = tmp_path_factory.mktemp("spark-security")
    files = make_tls_files(root / "certs")
    add = [sys.executable, "-m", "exactly", "users", "add", USER, "--password", PASSWORD]
    subprocess.run([*add, "--data-dir", str(root / "data")], check=True, capture_output=True, timeout=60)
    secure_port, plain_port = free_port(), free_port()
    settings = [
        f"listeners=SASL_SSL://127.0.0.1:{secure_port},PLAINTEXT://127.0.0.1:{plain_port}",
        "listener.security.protocol.map=SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT",
        *ssl_settings(files, "none"),
        "sasl.enabled.mechanisms=SCRAM-SHA-256",
        "group.initial.rebalance.delay.ms=0",
    ]
    with running_broker(root / "data", *settings, port=plain_port) as proc:
        yield SecureBroker(proc, files, secure_port, plain_port)


def _with(builder: Any, options: dict[str, str]) -> Any:
    for key, value in options.items():
        builder = builder.option(key, value)
    return builder


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_write_over_sasl_ssl(spark: Any, secure: SecureBroker, guarantee: str) -> None:
    topic = unique_name("secure-write")
    create_topic(secure.plain_bootstrap, topic, 2)
    before = secure.authenticated()
    rows = [(f"k{i}", f"{guarantee}-{i}", i % 2) for i in range(40)]
    df = spark.createDataFrame(rows, "key string, value string, partition int")
    _with(df.write.format("exactly"), secure.options()).option("topic", topic).option(
        "guarantee", guarantee
    ).mode("append").save()
    got = read_committed(secure.plain_bootstrap, topic, minimum=len(rows))
    assert sorted((r.key, r.value, r.partition) for r in got) == sorted(
        (k.encode(), v.encode(), p) for k, v, p in rows
    )
    assert secure.authenticated() > before


def test_read_over_sasl_ssl(spark: Any, secure: SecureBroker) -> None:
    topic = unique_name("secure-read")
    create_topic(secure.plain_bootstrap, topic, 2)
    records = [(i % 2, f"secret-{i}".encode()) for i in range(30)]
    produce(secure.plain_bootstrap, topic, records)
    before = secure.authenticated()
    df = _with(spark.read.format("exactly"), secure.options()).option("subscribe", topic).load()
    got = [(row.partition, bytes(row.value)) for row in df.select("partition", "value").collect()]
    assert sorted(got) == sorted(records)
    assert secure.authenticated() > before


def test_a_wrong_password_fails_the_read(spark: Any, secure: SecureBroker) -> None:
    topic = unique_name("secure-refused")
    create_topic(secure.plain_bootstrap, topic, 1)
    options = {**secure.options(password="not-the-password"), "kafkaConsumer.pollTimeoutMs": "5000"}
    with pytest.raises(Exception) as failure:
        _with(spark.read.format("exactly"), options).option("subscribe", topic).load().collect()
    message = str(failure.value)
    assert "refused the client's credentials" in message, message
    assert "Authentication failed" in message, message  # the broker's reason, passed on
    assert "not-the-password" not in secure.proc.full_log()
