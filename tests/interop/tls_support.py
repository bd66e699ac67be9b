"""Helpers of the TLS and SASL tests (test_tls.py, test_sasl.py).

Certificates made by `trustme`: one CA, a server certificate for 127.0.0.1 and localhost, and client
certificates whose subject is O=<org>, OU=<unit>, CN=<name> (DN "CN=..,OU=..,O=..").

Round trips with each real client over a secured listener, given that client's own security settings:
records produced to partition 0 of a topic and consumed back, which the tests compare.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, Producer
from cryptography.hazmat.primitives import serialization
from kafka import KafkaConsumer, KafkaProducer


@dataclass(frozen=True)
class ClientCert:
    cert: Path  # the client's certificate (PEM)
    key: Path  # its private key (PEM, unencrypted)
    dn: str  # its subject as Kafka names it


@dataclass(frozen=True)
class TlsFiles:
    directory: Path
    ca_obj: trustme.CA
    ca: Path  # the CA certificate (trust store of both sides)
    server: Path  # the broker's key store: private key + certificate chain (PEM)

    def client(self, name: str, unit: str = "x", org: str = "y") -> ClientCert:
        leaf = self.ca_obj.issue_cert(
            f"{name}@example.com", common_name=name, organization_unit_name=unit, organization_name=org
        )
        cert, key = self.directory / f"{name}.crt", self.directory / f"{name}.key"
        leaf.cert_chain_pems[0].write_to_path(str(cert))
        leaf.private_key_pem.write_to_path(str(key))
        return ClientCert(cert, key, f"CN={name},OU={unit},O={org}")

    def encrypted_server_key_store(self, password: str) -> Path:
        """The server key store with its private key encrypted (PKCS#8) under `password`."""
        pem = self.server.read_bytes()
        block = re.search(rb"-----BEGIN ([A-Z ]*)PRIVATE KEY-----.*?-----END \1PRIVATE KEY-----\n", pem, re.S)
        assert block is not None
        start, end = block.span()
        key = serialization.load_pem_private_key(pem[start:end], None)
        encrypted = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password.encode()),
        )
        path = self.directory / "server-encrypted.pem"
        path.write_bytes(encrypted + pem[:start] + pem[end:])
        return path


def make_tls_files(directory: Path) -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="exactly tests")
    ca_path = directory / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_path))
    server = directory / "server.pem"
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(server))
    return TlsFiles(directory, ca, ca_path, server)


def ssl_settings(files: TlsFiles, client_auth: str = "required", key_store: Path | None = None) -> list[str]:
    """The broker settings of a PEM SSL listener (global ssl.* names)."""
    return [
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={key_store or files.server}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={files.ca}",
        f"ssl.client.auth={client_auth}",
    ]


def confluent_ssl(files: TlsFiles, client: ClientCert | None) -> dict[str, str]:
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(files.ca)}
    if client is not None:
        conf |= {"ssl.certificate.location": str(client.cert), "ssl.key.location": str(client.key)}
    return conf


# --- round trips with the real clients ------------------------------------------------------------------


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_for(condition: Callable[[], object], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def consume_confluent(conf: dict[str, str], topic: str, count: int, **extra: str) -> list[bytes]:
    """Up to `count` values of `topic` from the beginning, by a confluent-kafka consumer (30 s at most)."""
    consumer = Consumer(
        {**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest", **extra}
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def transactions_confluent(conf: dict[str, str], topic: str) -> list[bytes]:
    """A committed, an aborted and a committed transaction by one confluent-kafka producer; what a
    read_committed consumer then reads (expected: committed-0..4, last)."""
    producer = Producer({**conf, "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(30)
    for values in ([f"committed-{i}" for i in range(5)], [f"aborted-{i}" for i in range(5)], ["last"]):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value.encode(), partition=0)
        if values[0].startswith("aborted"):
            producer.flush(30)
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    return consume_confluent(conf, topic, 6, **{"isolation.level": "read_committed"})


def kafka_python_round_trip(bootstrap: str, topic: str, **security: Any) -> list[bytes]:
    """k0..k9 produced and consumed back by kafka-python with `security` (its own argument names)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, **security)
    for i in range(10):
        producer.send(topic, f"k{i}".encode(), partition=0)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=15_000,
        **security,
    )
    values = [m.value for m in consumer]
    consumer.close()
    return values


def aiokafka_round_trip(bootstrap: str, topic: str, **security: Any) -> list[bytes]:
    """a0..a9 produced and consumed back by aiokafka with `security` (its own argument names)."""

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **security)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(topic, f"a{i}".encode(), partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", **security
        )
        await consumer.start()
        values: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for msg in consumer:
                    assert msg.value is not None
                    values.append(msg.value)
                    if len(values) == 10:
                        break
        finally:
            await consumer.stop()
        return values

    return asyncio.run(run())


def kcat_round_trip(bootstrap: str, topic: str, settings: dict[str, str]) -> list[str]:
    """kc0..kc4 produced and consumed back by kcat with librdkafka `settings` (-X)."""
    options = [x for key, value in settings.items() for x in ("-X", f"{key}={value}")]
    base = ["kcat", "-b", bootstrap, *options, "-t", topic]
    lines = "".join(f"kc{i}\n" for i in range(5))
    subprocess.run([*base, "-P", "-p", "0"], input=lines, text=True, check=True, timeout=60)
    out = subprocess.run(
        [*base, "-C", "-p", "0", "-o", "beginning", "-e", "-q"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout.splitlines()
