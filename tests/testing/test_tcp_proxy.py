"""BlackholeProxy: bytes cross unchanged both ways; a cut holds them (connections stay open) until healed;
a close on one side closes the other."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from exactly.testing.tcp_proxy import BlackholeProxy


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=_echo, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()
    server.close()


def _echo(conn: socket.socket) -> None:
    with conn:
        while data := conn.recv(4096):
            conn.sendall(data)


def _recv(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def test_bytes_cross_both_ways_unchanged(echo: tuple[str, int]) -> None:
    with BlackholeProxy(echo) as proxy, socket.create_connection(("127.0.0.1", proxy.port), 5) as sock:
        payload = bytes(range(256)) * 1000
        sock.sendall(payload)
        assert _recv(sock, len(payload)) == payload


def test_a_cut_holds_the_bytes_until_healed(echo: tuple[str, int]) -> None:
    with BlackholeProxy(echo) as proxy, socket.create_connection(("127.0.0.1", proxy.port), 5) as sock:
        sock.sendall(b"before")
        assert _recv(sock, 6) == b"before"
        proxy.blackhole(True)
        sock.sendall(b"during")
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sock.recv(10)
        with socket.create_connection(("127.0.0.1", proxy.port), 5) as other:  # new ones are cut too
            other.sendall(b"new")
            other.settimeout(0.5)
            with pytest.raises(TimeoutError):
                other.recv(10)
            proxy.blackhole(False)
            other.settimeout(5)
            assert _recv(other, 3) == b"new"
        sock.settimeout(5)
        assert _recv(sock, 6) == b"during"


def test_a_close_on_one_side_closes_the_other(echo: tuple[str, int]) -> None:
    with BlackholeProxy(echo) as proxy:
        sock = socket.create_connection(("127.0.0.1", proxy.port), 5)
        sock.sendall(b"x")
        assert _recv(sock, 1) == b"x"
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(5)
        assert sock.recv(10) == b""  # the echo server saw the close and closed its side
        sock.close()


def test_nothing_listening_upstream_closes_the_connection() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        address = unused.getsockname()
    with BlackholeProxy(address) as proxy, socket.create_connection(("127.0.0.1", proxy.port), 5) as sock:
        sock.settimeout(5)
        assert sock.recv(10) == b""
