"""Connections: no leak, no traceback, quick shutdown (issue 10, item 2).

The real broker process at `--log-level DEBUG`, driven with raw frames (our own codecs) over plain
sockets. It logs one line per closed connection, `closing connection N from HOST:PORT (reason); K open`,
where HOST:PORT is the client socket's own address: that is how a test knows that the broker let go of
exactly the connections it dropped, and the "K open" count (the broker's table of connection tasks) is
what a leaked, forever-parked connection task would keep up. Besides that, the broker's socket count in
/proc/PID/fd and its RSS (/proc/PID/status) return to where they were, the broker keeps answering, its
log has no traceback, and SIGTERM ends it in under 2 s.

A reset is SO_LINGER (on, 0) then close: the kernel sends RST. Requests that park: a long-poll Fetch
(max_wait 30 s on an empty partition), a JoinGroup held by the group's initial rebalance delay, an
InitProducerId that waits for a transactional id whose markers are being written (the
`exactly.debug.end.txn.pause` hook parks the marker job for good).
"""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from exactly.errors import ErrorCode
from exactly.protocol.api import encode_request
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.protocol.messages.describe_groups import DescribeGroupsRequest
from exactly.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from exactly.protocol.messages.init_producer_id import InitProducerIdRequest
from exactly.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from exactly.protocol.messages.metadata import MetadataRequest
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from exactly.records.builder import BatchBuilder
from exactly.testing.processes import BrokerProcess
from tests.interop.client import RawClient
from tests.interop.support import create_topic

pytestmark = pytest.mark.interop

DEADLINE = 60.0  # only reached when a test fails
CLOSE_LINE = re.compile(
    r"(DEBUG|INFO|WARNING|ERROR) \S+: closing connection (\d+) from (\S+) \((.*)\); (\d+) open"
)
NOISE = ("Traceback", "Unhandled", "Exception in callback", "never retrieved", " ERROR ", " CRITICAL ")
PAUSE = "exactly.debug.end.txn.pause"
EMPTY = "empty"  # a topic nobody writes to: Fetch on it long-polls


# --- the broker and what can be seen of it from outside -------------------------------------------------


@dataclass(frozen=True)
class Closed:
    level: str
    connection_id: int
    peer: str
    reason: str
    still_open: int


class Watched:
    """A broker process at DEBUG with the views a test needs: closed connections, sockets, RSS."""

    def __init__(self, proc: BrokerProcess) -> None:
        self.proc = proc

    @property
    def pid(self) -> int:
        assert self.proc.proc is not None
        return self.proc.proc.pid

    def full_log(self) -> str:
        return self.proc.log_path.read_text(errors="replace")

    def closed(self) -> list[Closed]:
        return [Closed(m[1], int(m[2]), m[3], m[4], int(m[5])) for m in CLOSE_LINE.finditer(self.full_log())]

    def wait_closed(self, peers: set[str]) -> dict[str, Closed]:
        """The close line of each of `peers` (client-side HOST:PORT), waiting for all of them."""
        deadline = time.monotonic() + DEADLINE
        while True:
            found = {c.peer: c for c in self.closed() if c.peer in peers}
            if len(found) == len(peers):
                return found
            assert time.monotonic() < deadline, (
                f"never closed: {sorted(peers - set(found))}\n{self.proc.log()}"
            )
            time.sleep(0.05)

    def open_connections(self) -> int:
        lines = self.closed()
        return lines[-1].still_open if lines else -1

    def sockets(self) -> int:
        count = 0
        for fd in os.listdir(f"/proc/{self.pid}/fd"):
            try:
                count += os.readlink(f"/proc/{self.pid}/fd/{fd}").startswith("socket:")
            except FileNotFoundError:
                continue
        return count

    def rss_kb(self) -> int:
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def wait_for(self, what: str, condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + DEADLINE
        while not condition():
            assert time.monotonic() < deadline, f"{what} never happened\n{self.proc.log()}"
            time.sleep(0.05)

    def assert_quiet_log(self) -> None:
        text = self.full_log()
        for noise in NOISE:
            assert noise not in text, f"{noise!r} in the broker log:\n{text[-6000:]}"

    def sigterm(self) -> float:
        """SIGTERM; the seconds until the process exited (asserts a clean exit)."""
        proc = self.proc.proc
        assert proc is not None
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(DEADLINE)
        took = time.monotonic() - started
        assert code == 0, self.proc.log()
        assert "stopped" in self.proc.log()
        return took


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Watched]]:
    started: list[BrokerProcess] = []

    def run(*settings: str) -> Watched:
        proc = BrokerProcess(tmp_path / f"data{len(started)}", *settings, log_level="DEBUG")
        started.append(proc)
        proc.start()
        create_topic(proc.bootstrap, EMPTY, 1)
        watched = Watched(proc)
        # Both connections so far (start()'s probe, create_topic's) are closed and logged.
        watched.wait_for(
            "a quiet start", lambda: len(watched.closed()) == 2 and watched.open_connections() == 0
        )
        return watched

    yield run
    for proc in started:
        proc.kill()


# --- raw frames and sockets -------------------------------------------------------------------------------


def api_versions(cid: int) -> bytes:
    return encode_request(ApiKey.API_VERSIONS, 3, cid, "conn-test", ApiVersionsRequest("conn-test", "1"))


def metadata(cid: int) -> bytes:
    return encode_request(ApiKey.METADATA, 12, cid, "conn-test", MetadataRequest(None, False))


def long_poll(cid: int, topic: str = EMPTY, max_wait_ms: int = 30_000) -> bytes:
    request = FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        topics=[
            FetchTopic(topic, partitions=[FetchPartition(0, fetch_offset=0, partition_max_bytes=1 << 20)])
        ],
    )
    return encode_request(ApiKey.FETCH, 12, cid, "conn-test", request)


def big_fetch(cid: int, topic: str, max_bytes: int) -> bytes:
    request = FetchRequest(
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=max_bytes,
        topics=[
            FetchTopic(topic, partitions=[FetchPartition(0, fetch_offset=0, partition_max_bytes=max_bytes)])
        ],
    )
    return encode_request(ApiKey.FETCH, 12, cid, "conn-test", request)


def join_group(cid: int, group: str, member_id: str = "") -> bytes:
    request = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=30_000,
        rebalance_timeout_ms=60_000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol("range", b"")],
    )
    return encode_request(ApiKey.JOIN_GROUP, 7, cid, "conn-test", request)


def new_member(client: RawClient, group: str) -> str:
    """A member id for `group` (the first JoinGroup of a member is answered MEMBER_ID_REQUIRED)."""
    request = JoinGroupRequest(
        group, 30_000, 60_000, "", None, "consumer", [JoinGroupRequestProtocol("range", b"")]
    )
    response = client.request(ApiKey.JOIN_GROUP, 7, request)
    assert response.error_code == ErrorCode.MEMBER_ID_REQUIRED
    member_id: str = response.member_id
    return member_id


def connect(watched: Watched, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket()
    if rcvbuf is not None:  # before connect, so that the window is negotiated with it
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(DEADLINE)
    sock.connect(("127.0.0.1", watched.proc.port))
    return sock


def address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"{host}:{port}"


def reset(sock: socket.socket) -> None:
    """Close with RST instead of FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def has_incoming(sock: socket.socket) -> bool:
    """Whether the broker sent something (or closed): readable now, without waiting."""
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


def assert_serving(watched: Watched, client: RawClient) -> None:
    """An old connection and a new one are both answered."""
    fresh = RawClient(watched.proc.bootstrap)
    for c in (client, fresh):
        response = c.request(ApiKey.METADATA, 12, MetadataRequest(None, False))
        assert response.error_code == ErrorCode.NONE
        assert EMPTY in {t.name for t in response.topics}
        assert response.brokers[0].port == watched.proc.port
    fresh.close()


def storm(watched: Watched, connections: int, requests: int) -> set[str]:
    """`connections` sockets that each pipeline `requests` requests without reading, then reset.

    A third of them send only ApiVersions (the broker's write buffer fills: its writer waits for a peer
    that never reads), a third mix in Metadata, a third put a 30 s long-poll Fetch every 100 requests
    (its writer waits for the Fetch while the reader waits for room in the full queue, reading paused).
    Returns the client-side addresses."""
    makers: Sequence[Callable[[int], bytes]]
    socks = []
    for n in range(connections):
        if n % 3 == 0:
            makers = [api_versions]
        elif n % 3 == 1:
            makers = [api_versions, metadata]
        else:
            makers = [api_versions] * 99 + [long_poll]
        payload = b"".join(makers[i % len(makers)](i) for i in range(requests))
        sock = connect(watched)
        sock.sendall(payload)
        socks.append(sock)
    # The broker is working on every connection once each has answers waiting in its receive queue.
    watched.wait_for("answers on every storm connection", lambda: all(has_incoming(s) for s in socks))
    peers = {address(s) for s in socks}
    for sock in socks:
        reset(sock)
    return peers


# --- tests -------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_pipelined_storms_then_reset_leave_nothing_behind(start: Callable[..., Watched]) -> None:
    watched = start()
    bystander = RawClient(watched.proc.bootstrap)
    assert_serving(watched, bystander)
    # Warm-up round: allocator pools, codec caches, the first use of every code path.
    watched.wait_closed(storm(watched, 10, 5000))
    watched.wait_for("only the bystander open", lambda: watched.open_connections() == 1)
    sockets = watched.sockets()
    rss = watched.rss_kb()

    for _ in range(2):
        closed = watched.wait_closed(storm(watched, 10, 5000))
        for c in closed.values():
            assert c.level == "DEBUG", c
            assert c.reason.startswith(("connection lost", "closed by the client")), c

    watched.wait_for("connections back to the baseline", lambda: watched.open_connections() == 1)
    watched.wait_for("sockets back to the baseline", lambda: watched.sockets() == sockets)
    watched.wait_for("RSS back to the baseline", lambda: watched.rss_kb() < rss + 16 * 1024)
    assert_serving(watched, bystander)
    assert watched.sigterm() < 2.0
    watched.assert_quiet_log()


def test_reset_right_after_one_request(start: Callable[..., Watched]) -> None:
    watched = start("group.initial.rebalance.delay.ms=60000")
    bystander = RawClient(watched.proc.bootstrap)
    assert_serving(watched, bystander)  # the broker has accepted it: it counts in the baseline
    watched.wait_for("only the bystander open", lambda: watched.open_connections() == 1)
    sockets = watched.sockets()
    before = len(watched.closed())
    resets = 0
    for i in range(20):
        for frame in (api_versions(i), metadata(i), long_poll(i), join_group(i, f"g{i}", f"m{i}")):
            sock = connect(watched)
            sock.sendall(frame)
            reset(sock)
            resets += 1
    # A connection reset before the broker accepted it has no peer address any more: count them all.
    watched.wait_for("every reset connection closed", lambda: len(watched.closed()) - before == resets)
    closed = watched.closed()[before:]
    assert closed[-1].still_open == 1  # the bystander
    assert {c.level for c in closed} == {"DEBUG"}
    assert all(c.reason.startswith(("connection lost", "closed by the client")) for c in closed), closed
    watched.wait_for("sockets back to the baseline", lambda: watched.sockets() == sockets)
    assert_serving(watched, bystander)
    assert watched.sigterm() < 2.0
    watched.assert_quiet_log()


def test_eof_in_the_middle_of_a_frame_and_after_a_request(start: Callable[..., Watched]) -> None:
    watched = start()
    frame = metadata(7)
    half = connect(watched)
    half.sendall(frame[:10])
    half_peer = address(half)
    half.close()  # FIN with the rest of the frame missing
    parked = connect(watched)
    parked.sendall(long_poll(1))
    parked_peer = address(parked)
    parked.close()  # FIN while the long-poll is parked
    closed = watched.wait_closed({half_peer, parked_peer})
    assert closed[half_peer].reason == "closed by the client: in the middle of a frame (10 bytes)"
    assert closed[half_peer].level == "DEBUG"
    assert closed[parked_peer].reason.startswith(("closed by the client", "connection lost"))
    assert watched.sigterm() < 2.0
    watched.assert_quiet_log()


def test_reset_during_parked_join_group(start: Callable[..., Watched]) -> None:
    watched = start("group.initial.rebalance.delay.ms=60000")
    bystander = RawClient(watched.proc.bootstrap)
    member_id = new_member(bystander, "held")
    sock = connect(watched)
    sock.sendall(join_group(1, "held", member_id))
    peer = address(sock)

    def preparing() -> bool:
        described = bystander.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(["held"]))
        group = described.groups[0]
        return group.group_state == "PreparingRebalance" and [m.member_id for m in group.members] == [
            member_id
        ]

    watched.wait_for("the JoinGroup parked in PreparingRebalance", preparing)
    assert not has_incoming(sock)  # parked: not answered
    reset(sock)
    assert watched.wait_closed({peer})[peer].reason.startswith("connection lost")
    assert_serving(watched, bystander)
    assert watched.sigterm() < 2.0
    watched.assert_quiet_log()


@pytest.mark.slow
def test_reset_during_init_producer_id_waiting_for_markers(start: Callable[..., Watched]) -> None:
    from confluent_kafka import Producer

    watched = start(f"{PAUSE}=prepare-written")
    create_topic(watched.proc.bootstrap, "txn-out", 1)
    producer = Producer({"bootstrap.servers": watched.proc.bootstrap, "transactional.id": "stuck"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("txn-out", b"v")
    producer.commit_transaction(30)  # answered once PrepareCommit is durable; the markers then park
    watched.wait_for("the marker job parked", lambda: "parked at prepare-written" in watched.full_log())
    # Every InitProducerId of "stuck" now waits (up to 1 s) for the id's next transition. Behind an
    # ApiVersions: once that is answered, the InitProducerIds that came with it are running.
    init = InitProducerIdRequest("stuck", 60_000)
    requests = [api_versions(0)] + [
        encode_request(ApiKey.INIT_PRODUCER_ID, 4, i, "conn-test", init) for i in range(1, 101)
    ]
    socks = [connect(watched) for _ in range(5)]
    for sock in socks:
        sock.sendall(b"".join(requests))
    watched.wait_for("ApiVersions answered", lambda: all(has_incoming(s) for s in socks))
    peers = {address(s) for s in socks}
    for sock in socks:
        reset(sock)
    closed = watched.wait_closed(peers)
    assert all(c.reason.startswith("connection lost") for c in closed.values()), closed
    bystander = RawClient(watched.proc.bootstrap)
    assert_serving(watched, bystander)
    assert watched.sigterm() < 2.0  # the parked marker job included
    watched.assert_quiet_log()
    del producer


@pytest.mark.slow
def test_a_client_that_does_not_read_costs_bounded_memory_and_is_closed_when_idle(
    start: Callable[..., Watched],
) -> None:
    watched = start("connections.max.idle.ms=3000")
    create_topic(watched.proc.bootstrap, "big", 1)
    client = RawClient(watched.proc.bootstrap)
    value = os.urandom(200_000)
    for i in range(5):  # 1 MB in 5 batches, incompressible
        builder = BatchBuilder()
        builder.append(1_700_000_000_000, None, value)
        partition = PartitionProduceData(0, builder.build())
        request = ProduceRequest(None, -1, 5000, [TopicProduceData("big", partition_data=[partition])])
        response = client.request(ApiKey.PRODUCE, 9, request)
        assert response.responses[0].partition_responses[0].base_offset == i
    client.close()
    rss = watched.rss_kb()
    # 3,000 fetches of 256 KB each = 750 MB of responses if the broker buffered them all.
    sock = connect(watched, rcvbuf=1 << 16)
    peer = address(sock)
    sock.sendall(b"".join(big_fetch(i, "big", 256 * 1024) for i in range(3000)))
    peak = rss
    deadline = time.monotonic() + DEADLINE
    while not any(c.peer == peer for c in watched.closed()):
        peak = max(peak, watched.rss_kb())
        assert time.monotonic() < deadline, watched.proc.log()
        time.sleep(0.05)
    closed = watched.wait_closed({peer})[peer]
    assert closed.reason == "client not reading its responses for connections.max.idle.ms"
    assert closed.level == "DEBUG"
    assert peak - rss < 120 * 1024, f"RSS grew by {(peak - rss) // 1024} MB"
    # What the client gets: whatever the broker wrote before it gave up, then the end of the stream.
    received = 0
    try:
        while chunk := sock.recv(1 << 20):  # a TimeoutError here: the broker kept the socket open
            received += len(chunk)
    except ConnectionResetError:
        pass
    assert received > 0
    sock.close()
    assert watched.sigterm() < 2.0
    watched.assert_quiet_log()


@pytest.mark.slow
def test_idle_connection_is_closed_but_not_one_with_a_long_poll(start: Callable[..., Watched]) -> None:
    watched = start("connections.max.idle.ms=2000")
    idle = RawClient(watched.proc.bootstrap)
    idle.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("t", "1"))
    polling = RawClient(watched.proc.bootstrap)
    polling.send_raw(long_poll(1, max_wait_ms=5000))  # longer than the idle timeout
    started = time.monotonic()
    idle_peer = address(idle.sock)
    assert watched.wait_closed({idle_peer})[idle_peer].reason == "idle for connections.max.idle.ms"
    assert idle.is_closed_by_peer()
    frame = polling.read_frame()  # the long poll's answer, after its full max_wait
    assert time.monotonic() - started >= 4.5
    assert struct.unpack(">i", frame[:4])[0] == 1
    polling_peer = address(polling.sock)
    assert polling_peer not in {c.peer for c in watched.closed()}
    assert watched.wait_closed({polling_peer})[polling_peer].reason == "idle for connections.max.idle.ms"
    assert watched.sigterm() < 2.0
    watched.assert_quiet_log()


@pytest.mark.slow
def test_sigterm_with_parked_requests_on_many_connections_exits_within_2_s(
    start: Callable[..., Watched],
) -> None:
    watched = start("group.initial.rebalance.delay.ms=60000")
    bystander = RawClient(watched.proc.bootstrap)
    socks = []
    for _ in range(6):  # 20 pipelined long polls each
        sock = connect(watched)
        sock.sendall(b"".join(long_poll(i) for i in range(20)))
        socks.append(sock)
    for n in range(3):  # JoinGroups held by the initial rebalance delay
        member_id = new_member(bystander, f"g{n}")
        sock = connect(watched)
        sock.sendall(join_group(1, f"g{n}", member_id))
        socks.append(sock)
    stuffed = connect(watched)  # a reader that never reads, its queue full
    stuffed.sendall(b"".join(api_versions(i) for i in range(5000)))
    socks.append(stuffed)
    watched.wait_for("the stuffed connection answered", lambda: has_incoming(stuffed))

    def joins_parked() -> bool:
        described = bystander.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(["g0", "g1", "g2"]))
        return all(g.group_state == "PreparingRebalance" and len(g.members) == 1 for g in described.groups)

    watched.wait_for("the JoinGroups parked", joins_parked)
    assert not any(has_incoming(s) for s in socks[:9])  # nothing parked can be answered for 30 s
    assert watched.sigterm() < 2.0
    watched.assert_quiet_log()
    for sock in socks:
        sock.close()
