"""`exactly.client.connection` against the real broker (round trips, pipelining, the broker going away)
and against a scripted peer for what a real broker never does (a response to another request)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from exactly.client.connection import (
    AsyncKafkaConnection,
    ConnectionClosedError,
    ConnectionPool,
    KafkaConnection,
    RequestPipeline,
    ResponseMismatchError,
)
from exactly.protocol.api import RequestHeader, decode_request, encode_response
from exactly.protocol.framing import FrameDecoder
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from exactly.protocol.messages.metadata import MetadataRequest, MetadataResponse
from exactly.testing.processes import BrokerProcess

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("connection") / "data") as broker:
        yield broker


def test_api_versions_round_trip(running: BrokerProcess) -> None:
    with KafkaConnection.open("127.0.0.1", running.port, client_id="test") as connection:
        response = connection.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("test", "1"))
        assert isinstance(response, ApiVersionsResponse)
        assert response.error_code == 0
        assert int(ApiKey.METADATA) in {key.api_key for key in response.api_keys}
        assert connection.in_flight == 0


def test_pipelined_requests_are_answered_in_order(running: BrokerProcess) -> None:
    with KafkaConnection.open("127.0.0.1", running.port) as connection:
        sent = [
            connection.send(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("test", "1")),
            connection.send(ApiKey.METADATA, 12, MetadataRequest(topics=[])),
            connection.send(ApiKey.API_VERSIONS, 0, ApiVersionsRequest()),
        ]
        assert sent == [1, 2, 3]
        assert connection.in_flight == 3
        first, second, third = (connection.receive() for _ in sent)
        assert isinstance(first, ApiVersionsResponse)
        assert isinstance(second, MetadataResponse)
        assert [b.port for b in second.brokers] == [running.port]
        assert isinstance(third, ApiVersionsResponse)
        assert connection.in_flight == 0
        with pytest.raises(RuntimeError, match="no request in flight"):
            connection.receive()


def test_request_refuses_while_pipelined_requests_are_unanswered(running: BrokerProcess) -> None:
    with KafkaConnection.open("127.0.0.1", running.port) as connection:
        connection.send(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("test", "1"))
        with pytest.raises(RuntimeError, match="1 pipelined requests unanswered"):
            connection.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("test", "1"))
        assert isinstance(connection.receive(), ApiVersionsResponse)


def test_asyncio_connection_pipelines_concurrent_requests(running: BrokerProcess) -> None:
    async def run() -> list[object]:
        connection = await AsyncKafkaConnection.open("127.0.0.1", running.port, client_id="test")
        try:
            return list(
                await asyncio.gather(
                    connection.request(ApiKey.METADATA, 12, MetadataRequest(topics=[])),
                    connection.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("test", "1")),
                    connection.request(ApiKey.METADATA, 12, MetadataRequest(topics=[])),
                )
            )
        finally:
            connection.close()

    kinds = [type(response) for response in asyncio.run(run())]
    assert kinds == [MetadataResponse, ApiVersionsResponse, MetadataResponse]


def test_the_pool_keeps_one_connection_per_address_until_dropped(running: BrokerProcess) -> None:
    address = f"127.0.0.1:{running.port}"
    pool = ConnectionPool(client_id="test")
    deadline = time.monotonic() + 30
    first = pool.get(address, deadline)
    assert pool.get(address, deadline) is first
    assert pool.any_open() == (address, first)
    assert isinstance(first.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest()), ApiVersionsResponse)
    pool.drop(address)
    assert not pool.is_open(address)
    assert pool.any_open() is None
    with pytest.raises(ConnectionClosedError):  # dropping closed it
        first.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
    second = pool.get(address, deadline)
    assert second is not first
    assert isinstance(second.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest()), ApiVersionsResponse)
    pool.close()
    assert pool.any_open() is None
    with pytest.raises(ValueError):
        pool.get("127.0.0.1:not-a-port", deadline)


def test_a_closed_connection_raises(running: BrokerProcess) -> None:
    connection = KafkaConnection.open("127.0.0.1", running.port)
    connection.close()
    with pytest.raises(ConnectionClosedError, match="the connection is closed"):
        connection.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("test", "1"))


def test_the_broker_stopping_raises_a_connection_error(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        connection = KafkaConnection.open("127.0.0.1", broker.port, timeout=10)
        connection.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("test", "1"))
        broker.stop()
        with pytest.raises(ConnectionError):  # closed (no bytes), reset or broken pipe: all say so
            connection.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("test", "1"))
        connection.close()
    finally:
        broker.kill()


# --- a scripted peer: answers each request with what `answer` makes of its frame --------------------------


def _scripted_peer(answer: Callable[[bytes], bytes | None]) -> tuple[int, threading.Thread]:
    """A one-connection server; `answer(request frame)` gives the bytes to reply, None: close instead."""
    server = socket.create_server(("127.0.0.1", 0))
    port: int = server.getsockname()[1]

    def serve() -> None:
        with server:
            peer, _ = server.accept()
            with peer:
                decoder = FrameDecoder()
                while data := peer.recv(1 << 16):
                    for frame in decoder.frames(data):
                        reply = answer(frame)
                        if reply is None:
                            return
                        peer.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return port, thread


def _api_versions_answer(correlation_shift: int) -> Callable[[bytes], bytes]:
    def answer(frame: bytes) -> bytes:
        header, _ = decode_request(frame)
        shifted = RequestHeader(
            header.api_key, header.api_version, header.correlation_id + correlation_shift, None
        )
        return b"".join(encode_response(shifted, ApiVersionsResponse()))

    return answer


def test_a_response_to_another_request_raises_a_mismatch() -> None:
    port, thread = _scripted_peer(_api_versions_answer(correlation_shift=7))
    with (
        KafkaConnection.open("127.0.0.1", port, timeout=10) as connection,
        pytest.raises(ResponseMismatchError, match="response to request 8, expected 1"),
    ):
        connection.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("test", "1"))
    thread.join(10)


def test_a_peer_closing_before_answering_raises_connection_closed() -> None:
    port, thread = _scripted_peer(lambda frame: None)
    with (
        KafkaConnection.open("127.0.0.1", port, timeout=10) as connection,
        pytest.raises(ConnectionClosedError, match="1 requests unanswered"),
    ):
        connection.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("test", "1"))
    thread.join(10)


def test_the_pipeline_refuses_a_response_with_nothing_in_flight() -> None:
    pipeline = RequestPipeline("test")
    assert pipeline.next_response() is None
    header = RequestHeader(int(ApiKey.API_VERSIONS), 3, 1, None)
    pipeline.feed(b"".join(encode_response(header, ApiVersionsResponse())))
    with pytest.raises(ResponseMismatchError, match="no request in flight"):
        pipeline.next_response()
