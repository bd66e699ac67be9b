"""The cluster run's link proxy: it tells a connection's source broker from its first request's client id,
and a cut stops that source's bytes (and only those) until healed."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.verify.cluster import LinkProxy, source_broker


def request(client_id: bytes, body: bytes = b"hello") -> bytes:
    """A request frame: api key 1 (Fetch), version 12, correlation id 7, the client id, `body`."""
    rest = struct.pack(">hhih", 1, 12, 7, len(client_id)) + client_id + body
    return struct.pack(">i", len(rest)) + rest


@given(st.integers(0, 2**31 - 1), st.sampled_from([b"replica-fetcher", b"txn-markers"]), st.binary())
def test_the_source_is_the_broker_id_in_the_client_id(broker: int, what: bytes, body: bytes) -> None:
    frame = request(b"exactly-" + what + b"-" + str(broker).encode(), body)
    assert source_broker(frame) == (True, broker)
    for cut in range(len(frame) - len(body)):
        assert source_broker(frame[:cut]) == (False, None)


@given(st.binary(max_size=40))
def test_any_other_client_id_has_no_source(client_id: bytes) -> None:
    if client_id.startswith(b"exactly-"):
        return
    assert source_broker(request(client_id)) == (True, None)


@pytest.fixture
def echo() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            threading.Thread(target=pump, args=(conn,), daemon=True).start()

    def pump(conn: socket.socket) -> None:
        with conn, contextlib.suppress(ConnectionResetError, BrokenPipeError):  # the proxy's cut resets it
            while data := conn.recv(65536):
                conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


def roundtrip(port: int, frame: bytes, timeout: float) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(frame)
        s.settimeout(timeout)
        got = b""
        deadline = time.monotonic() + timeout
        while len(got) < len(frame) and time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            got += chunk
        return got


def test_a_cut_source_is_held_the_others_pass_and_heal_lets_it_through(echo: int) -> None:
    with LinkProxy(("127.0.0.1", echo)).start() as link:
        two, three = request(b"exactly-replica-fetcher-2"), request(b"exactly-txn-markers-3")
        link.cut(2)
        assert roundtrip(link.port, two, 0.5) == b""
        assert roundtrip(link.port, three, 5) == three
        link.heal()
        assert roundtrip(link.port, two, 5) == two
        link.blackhole(True)
        assert roundtrip(link.port, three, 0.5) == b""
        link.heal()
        with socket.create_connection(("127.0.0.1", link.port), timeout=5) as s:
            link.cut(3)
            s.sendall(three)  # held while cut, delivered once healed, on the same connection
            s.settimeout(0.3)
            with pytest.raises(TimeoutError):
                s.recv(10)
            link.cut(3, on=False)
            s.settimeout(5)
            got = b""
            while len(got) < len(three):
                got += s.recv(65536)
            assert got == three
