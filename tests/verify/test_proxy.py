"""The frame-aware proxy without a broker: a small frame server stands upstream, answering every request
frame with `correlation id | b"re:" | the request's body`, and recording what reached it (by connection)."""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from exactly.verify.proxy import Action, FaultProxy, Rule, cut_frames, request_header

API_VERSIONS, PRODUCE, METADATA, END_TXN = 18, 0, 3, 26


def request(key: int, corr: int, body: bytes = b"", version: int = 1) -> bytes:
    payload = struct.pack(">hhi", key, version, corr) + body
    return struct.pack(">i", len(payload)) + payload


class FrameServer:
    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.got: list[tuple[int, bytes]] = []  # (connection number, whole request frame)
        self.cond = threading.Condition()
        self.connections = 0
        self.stop = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                s, _ = self.listener.accept()
            except OSError:
                return
            with self.cond:
                self.connections += 1
                n = self.connections
            threading.Thread(target=self.serve, args=(s, n), daemon=True).start()

    def serve(self, s: socket.socket, n: int) -> None:
        buffer = bytearray()
        with s, contextlib.suppress(OSError):
            while data := s.recv(1 << 16):
                buffer += data
                for frame in cut_frames(buffer):
                    with self.cond:
                        self.got.append((n, frame))
                        self.cond.notify_all()
                    corr = request_header(frame).correlation_id
                    answer = struct.pack(">i", corr) + b"re:" + frame[12:]
                    s.sendall(struct.pack(">i", len(answer)) + answer)

    def wait(self, count: int, timeout: float = 10) -> list[tuple[int, bytes]]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.got) >= count, timeout), self.got
            return list(self.got)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def server() -> Iterator[FrameServer]:
    s = FrameServer()
    yield s
    s.close()


@pytest.fixture
def proxy(server: FrameServer) -> Iterator[FaultProxy]:
    with FaultProxy(("127.0.0.1", server.port), seed=1) as p:
        yield p


def connect(proxy: FaultProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=10)


def read_response(s: socket.socket) -> tuple[int, bytes]:
    head = recv_exact(s, 4)
    (size,) = struct.unpack(">i", head)
    frame = recv_exact(s, size)
    (corr,) = struct.unpack_from(">i", frame)
    return corr, frame[4:]


def recv_exact(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)


def closed_by_proxy(s: socket.socket, timeout: float = 5) -> bool:
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_cut_frames_takes_whole_frames_only() -> None:
    a, b = request(1, 7, b"x" * 10), request(3, 8)
    buffer = bytearray(a + b + b[:5])
    assert cut_frames(buffer) == [a, b]
    assert buffer == bytearray(b[:5])
    assert cut_frames(buffer) == []
    buffer += b[5:]
    assert cut_frames(buffer) == [b]
    assert not buffer
    assert request_header(a).api_key == 1
    assert request_header(a).correlation_id == 7


def test_frames_split_anyhow_pass_unaltered_and_answers_match(server: FrameServer, proxy: FaultProxy) -> None:
    rng = random.Random(3)
    frames = [
        request(rng.choice((0, 1, 3, 18)), i, rng.randbytes(rng.choice((0, 1, 100, 70_000))))
        for i in range(40)
    ]
    stream = b"".join(frames)
    with connect(proxy) as s:
        at = 0
        while at < len(stream):  # chunks that cut sizes, headers and bodies
            step = rng.choice((1, 3, 7, 5000))
            s.sendall(stream[at : at + step])
            at += step
        answers = [read_response(s) for _ in frames]
    assert [frame for _, frame in server.wait(40)] == frames
    assert [corr for corr, _ in answers] == list(range(40))
    assert [body for _, body in answers] == [b"re:" + f[12:] for f in frames]
    assert sum(v for k, v in proxy.stats.items() if k.startswith("response key")) == 40


def test_delay_keeps_the_connection_in_order(server: FrameServer, proxy: FaultProxy) -> None:
    proxy.add_rule(Rule(Action.DELAY, frozenset({END_TXN}), delay_ms=600))
    with connect(proxy) as s, connect(proxy) as other:
        start = time.monotonic()
        s.sendall(request(END_TXN, 1) + request(METADATA, 2))
        other.sendall(request(METADATA, 3))
        assert read_response(other)[0] == 3  # another connection is not held up
        assert time.monotonic() - start < 0.5
        assert [read_response(s)[0] for _ in range(2)] == [1, 2]
        assert time.monotonic() - start >= 0.6
    assert [request_header(f).correlation_id for _, f in server.wait(3)] == [3, 1, 2]


def test_hold_until_released_by_api_key(server: FrameServer, proxy: FaultProxy) -> None:
    proxy.add_rule(Rule(Action.HOLD, frozenset({END_TXN, PRODUCE})))
    with connect(proxy) as s, connect(proxy) as t:
        s.sendall(request(END_TXN, 1) + request(METADATA, 2))
        t.sendall(request(PRODUCE, 3))
        wait_until(lambda: proxy.held() == 2, proxy.describe())
        s.sendall(request(METADATA, 4))  # behind the held one
        t.sendall(request(METADATA, 5))
        assert proxy.release_held(METADATA) == 0
        assert proxy.release_held(END_TXN) == 1
        assert proxy.held() == 1
        assert [read_response(s)[0] for _ in range(3)] == [1, 2, 4]
        assert closed_by_proxy(t, 0.3) is False  # t's Produce is still held, so is its Metadata
        assert proxy.release_held() == 1
        assert [read_response(t)[0] for _ in range(2)] == [3, 5]
    assert proxy.stats["hold key 26"] == 1
    assert proxy.stats["hold key 0"] == 1
    assert proxy.stats["released"] == 2


def test_held_requests_of_a_closed_client_still_arrive_when_released(
    server: FrameServer, proxy: FaultProxy
) -> None:
    proxy.add_rule(Rule(Action.HOLD, frozenset({END_TXN}), limit=1))
    with connect(proxy) as s:
        s.sendall(request(END_TXN, 1, b"late"))
        wait_until(lambda: proxy.held() == 1, proxy.describe())
    assert proxy.release_held() == 1
    assert server.wait(1)[0][1] == request(END_TXN, 1, b"late")
    wait_until(lambda: proxy.stats["late response key 26"] == 1, proxy.describe())


def test_drop_request_closes_and_the_server_never_sees_it(server: FrameServer, proxy: FaultProxy) -> None:
    proxy.add_rule(Rule(Action.DROP_REQUEST, frozenset({PRODUCE}), limit=1))
    with connect(proxy) as s:
        s.sendall(request(METADATA, 1))
        assert read_response(s)[0] == 1
        s.sendall(request(PRODUCE, 2))
        assert closed_by_proxy(s)
    with connect(proxy) as s:  # the limit is spent: the next one passes
        s.sendall(request(PRODUCE, 3))
        assert read_response(s)[0] == 3
    assert [request_header(f).correlation_id for _, f in server.wait(2)] == [1, 3]


def test_drop_response_forwards_the_request_and_closes(server: FrameServer, proxy: FaultProxy) -> None:
    proxy.add_rule(Rule(Action.DROP_RESPONSE, frozenset({END_TXN})))
    with connect(proxy) as s:
        s.sendall(request(END_TXN, 9, b"commit"))
        assert closed_by_proxy(s)
    assert server.wait(1) == [(1, request(END_TXN, 9, b"commit"))]
    assert proxy.stats["drop-response key 26"] == 1
    assert proxy.dropped == 1


def test_duplicate_replays_after_the_handshake_on_a_fresh_connection(
    server: FrameServer, proxy: FaultProxy
) -> None:
    proxy.add_rule(Rule(Action.DUPLICATE, frozenset({PRODUCE})))
    proxy.keep_responses(frozenset({PRODUCE}))
    hello, produce = request(API_VERSIONS, 1, b"hello", version=3), request(PRODUCE, 2, b"batch")
    with connect(proxy) as s:
        s.sendall(hello)
        assert read_response(s)[0] == 1
        s.sendall(produce)
        assert read_response(s) == (2, b"re:batch")
        got = server.wait(4)
        assert closed_by_proxy(s, 0.3) is False  # one answer only, and the connection goes on
    assert got == [(1, hello), (1, produce), (2, hello), (2, produce)]
    wait_until(lambda: proxy.stats["replayed"] == 1, proxy.describe())
    assert [(seen.replay, seen.frame) for seen in proxy.seen] == [
        (False, struct.pack(">i", 2) + b"re:batch"),
        (True, struct.pack(">i", 2) + b"re:batch"),
    ]


def test_reset_sends_an_rst(server: FrameServer, proxy: FaultProxy) -> None:
    proxy.add_rule(Rule(Action.RESET, frozenset({PRODUCE})))
    with connect(proxy) as s:
        s.sendall(request(PRODUCE, 1))
        s.settimeout(5)
        with pytest.raises(ConnectionResetError):
            s.recv(1 << 16)
    assert proxy.resets == 1


def test_blackhole_rule_swallows_the_rest_of_the_connection(server: FrameServer, proxy: FaultProxy) -> None:
    proxy.add_rule(Rule(Action.BLACKHOLE, frozenset({END_TXN}), limit=1))
    with connect(proxy) as s:
        s.sendall(request(METADATA, 1))
        assert read_response(s)[0] == 1
        s.sendall(request(END_TXN, 2) + request(METADATA, 3))
        assert closed_by_proxy(s, 0.5) is False  # open, and silent
    with connect(proxy) as s:
        s.sendall(request(METADATA, 4))
        assert read_response(s)[0] == 4
    assert [request_header(f).correlation_id for _, f in server.wait(2)] == [1, 4]


def test_blackhole_holds_everything_until_healed(server: FrameServer, proxy: FaultProxy) -> None:
    with connect(proxy) as s:
        s.sendall(request(METADATA, 1))
        assert read_response(s)[0] == 1
        proxy.blackhole(True)
        s.sendall(request(PRODUCE, 2))
        assert closed_by_proxy(s, 0.5) is False
        assert len(server.got) == 1
        proxy.blackhole(False)
        assert read_response(s)[0] == 2


def test_limit_api_keys_and_a_seeded_probability(server: FrameServer) -> None:
    def pattern() -> list[int]:
        with FaultProxy(("127.0.0.1", server.port), seed=42) as p:
            p.add_rule(Rule(Action.DELAY, frozenset({PRODUCE}), probability=0.5, delay_ms=1))
            p.add_rule(Rule(Action.DELAY, frozenset({METADATA}), delay_ms=1, limit=3))
            with connect(p) as s:
                fired = []
                for i in range(40):
                    s.sendall(request(PRODUCE if i % 2 else METADATA, i))
                    assert read_response(s)[0] == i
                    fired.append(p.stats["delay key 0"] + p.stats["delay key 3"])
                assert p.stats["delay key 3"] == 3
                assert 3 <= p.stats["delay key 0"] <= 17
                return fired

    assert pattern() == pattern()


def test_set_upstream_moves_new_connections(server: FrameServer, proxy: FaultProxy) -> None:
    second = FrameServer()
    try:
        with connect(proxy) as s:
            s.sendall(request(METADATA, 1))
            read_response(s)
            proxy.set_upstream(("127.0.0.1", second.port))
            with connect(proxy) as t:
                t.sendall(request(METADATA, 2))
                assert read_response(t)[0] == 2
            s.sendall(request(METADATA, 3))  # an open connection stays where it was
            assert read_response(s)[0] == 3
        assert [request_header(f).correlation_id for _, f in second.wait(1)] == [2]
        assert [request_header(f).correlation_id for _, f in server.wait(2)] == [1, 3]
    finally:
        second.close()
