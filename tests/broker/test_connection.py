"""The pure parts of `exactly.broker.connection`: how a vanished peer is recognised from the socket's TCP
state (real loopback sockets), and which reasons for closing are worth more than a DEBUG line."""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Iterator

import pytest

from exactly.broker.connection import CloseReason, Ending, peer_gone

pytestmark = pytest.mark.skipif(not hasattr(socket, "TCP_INFO"), reason="TCP_INFO is Linux-only")


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(server side, client side) of one loopback TCP connection."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    yield server, client
    server.close()
    client.close()


def wait_until_gone(sock: socket.socket) -> bool:
    deadline = time.monotonic() + 30
    while not peer_gone(sock):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_connected_peer_is_not_gone(pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    client.sendall(b"unread request bytes")  # unread data does not change the state
    assert not peer_gone(server)
    assert not peer_gone(client)


def test_a_reset_is_seen_without_reading(pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    client.sendall(b"unread request bytes")
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()
    assert wait_until_gone(server)


def test_a_close_is_seen_without_reading(pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    client.close()  # FIN: Kafka clients never half-close, so the peer is gone
    assert wait_until_gone(server)


def test_a_closed_socket_counts_as_gone(pair: tuple[socket.socket, socket.socket]) -> None:
    server, _ = pair
    server.close()
    assert peer_gone(server)


def test_no_socket_is_not_evidence() -> None:
    assert not peer_gone(None)


def test_only_bad_input_and_failures_are_louder_than_debug() -> None:
    levels = {reason: reason.level for reason in CloseReason}
    assert levels.pop(CloseReason.BAD_REQUEST) == logging.WARNING
    assert levels.pop(CloseReason.REQUEST_FAILED) == logging.ERROR
    assert levels.pop(CloseReason.INTERNAL_ERROR) == logging.ERROR
    assert set(levels.values()) == {logging.DEBUG}


def test_ending_reads_as_reason_then_detail() -> None:
    assert str(Ending(CloseReason.PEER_CLOSED)) == "closed by the client"
    assert (
        str(Ending(CloseReason.PEER_LOST, "[Errno 104] Connection reset by peer"))
        == "connection lost: [Errno 104] Connection reset by peer"
    )
