"""Connections get their share of the open-file limit (issue 14): the real broker under a low limit holds
at most its connection slots (max.connections, and the limit less the segment files' budget and a
reserve); a client beyond them waits in the listen backlog and is served once a connection closes, as
Kafka's Acceptor waits for a slot. Partitions keep their descriptors meanwhile: with every slot taken,
records still go to and come back from 200 partitions, and nothing fails with EMFILE."""

from __future__ import annotations

import os
import re
import socket
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.testing.processes import BrokerProcess
from tests.interop.client import RawClient
from tests.interop.support import create_topic

pytestmark = pytest.mark.interop

DEADLINE = 60.0  # only reached when a test fails
BUDGET_LINE = re.compile(r"open-file limit (\d+).*?: (\d+) segment files at once.*?, (\d+) connections")


def wait_for(condition: str, check: object) -> None:
    assert callable(check)
    deadline = time.monotonic() + DEADLINE
    while not check():
        assert time.monotonic() < deadline, condition
        time.sleep(0.05)


def api_versions(client: RawClient) -> int:
    response = client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("slots", "1"))
    error: int = response.error_code
    return error


def budget(broker: BrokerProcess) -> tuple[int, int, int]:
    match = BUDGET_LINE.search(broker.log())
    assert match is not None, broker.log()
    limit, segments, connections = (int(g) for g in match.groups())
    return limit, segments, connections


def test_the_open_file_limit_is_shared_out(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", nofile=1024) as broker:
        # a quarter for segment files, a tenth (at least 64) kept back, the rest for connections
        assert budget(broker) == (1024, 256, 1024 - 256 - 102)


def test_max_connections_makes_new_clients_wait_for_a_slot(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", "max.connections=3") as broker:
        held = [RawClient(broker.bootstrap) for _ in range(3)]
        assert [api_versions(c) for c in held] == [0, 0, 0]
        waiting = RawClient(broker.bootstrap, timeout=2.0)  # the kernel completes the TCP handshake
        waiting.send_frame(b"")  # an empty frame: any answer, or a close, would show it was accepted
        with pytest.raises(TimeoutError):
            waiting.read_frame()
        wait_for("the broker says it holds the most", lambda: "new connections wait" in broker.log())
        held.pop().close()
        waiting.sock.settimeout(DEADLINE)
        with pytest.raises(ConnectionError):  # accepted now: the malformed frame closes it
            waiting.read_frame()
        late = RawClient(broker.bootstrap, timeout=2.0)
        held.pop().close()
        late.sock.settimeout(DEADLINE)
        assert api_versions(late) == 0
        assert "accepting connections again" in broker.log()
        for client in [*held, waiting, late]:
            client.close()


def test_every_slot_taken_leaves_the_partitions_their_descriptors(tmp_path: Path) -> None:
    """Under an open-file limit of 512: 200 partitions (more than the 128 segment files kept open), every
    connection slot taken by idle clients, then records to all 200 partitions and back through a few slots
    freed for the producer and the consumer."""
    with BrokerProcess(tmp_path / "data", nofile=512) as broker:
        _, segments, connections = budget(broker)
        assert (segments, connections) == (128, 512 - 128 - 64)
        for t in range(2):
            create_topic(broker.bootstrap, f"t{t}", 100)
        idle = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(connections)]
        wait_for("the broker holds every slot", lambda: "new connections wait" in broker.log())
        for sock in idle[:8]:  # room for the producer's and the consumer's connections
            sock.close()
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
        for t in range(2):
            for p in range(100):
                producer.produce(f"t{t}", f"t{t}-{p}".encode(), partition=p)
        assert producer.flush(DEADLINE) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "slots"})
        consumer.assign([TopicPartition(f"t{t}", p, 0) for t in range(2) for p in range(100)])
        got: dict[tuple[str, int], bytes | None] = {}
        deadline = time.monotonic() + DEADLINE
        while len(got) < 200 and time.monotonic() < deadline:
            for m in consumer.consume(200, timeout=1.0):
                assert m.error() is None, m.error()
                got[(m.topic() or "", m.partition() or 0)] = m.value()
        consumer.close()
        assert got == {(f"t{t}", p): f"t{t}-{p}".encode() for t in range(2) for p in range(100)}
        assert broker.proc is not None
        assert len(os.listdir(f"/proc/{broker.proc.pid}/fd")) < 512
        assert "Too many open files" not in broker.log()
        for sock in idle[8:]:
            sock.close()
