"""One connection to a Kafka broker, for exactly's own clients (the two-phase commit client, the
benchmarks): requests written with `exactly.protocol.api.encode_request`, responses read with
`decode_response`.

`RequestPipeline` is the connection without the socket (sans-IO): it numbers the requests (correlation
ids 1, 2, ...), remembers the ones in flight, cuts the bytes received into frames and decodes each as the
response to the oldest request in flight; Kafka answers the requests of one connection in the order they
were sent, so a response with another correlation id is a protocol error (`ResponseMismatchError`).
asyncio callers feed it their own reads.

`KafkaConnection` is the pipeline on a blocking socket: `open` connects (TCP_NODELAY), does the TLS
handshake and the SASL exchange when `security` (`exactly.client.security.ClientSecurity`) asks for them;
`request` sends and waits for the answer; `send` then `receive` pipelines (several requests written before
the first answer is read, the answers read in the order of the requests). The broker closing the
connection raises `ConnectionClosedError`. Every blocking step waits up to the socket's timeout, or until
`deadline` (a `time.monotonic()` instant) when one is given. Not thread-safe: one connection per thread.

`ConnectionPool` keeps one open `KafkaConnection` per broker address ("host:port"), opened on first use
and dropped when it fails, for clients that talk to several brokers (the transactional and two-phase
commit clients).

`AsyncKafkaConnection` is the pipeline on an asyncio stream, for benchmarks that drive many connections
from one process and for the brokers' replica fetchers: any number of coroutines may await `request` at
once (the requests are pipelined), and a reader task hands each response to its request in order. `open`
does TLS (asyncio's, with `security.ssl_context()`) and the same SASL exchange as the blocking connection
when `security` asks for them.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import socket
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from exactly.client.security import ClientSecurity
from exactly.errors import ProtocolError
from exactly.protocol.api import decode_response, encode_request
from exactly.protocol.framing import FrameDecoder

__all__ = [
    "AsyncKafkaConnection",
    "ConnectionClosedError",
    "KafkaConnection",
    "PendingRequest",
    "RequestPipeline",
    "ResponseMismatchError",
]

DEFAULT_CLIENT_ID = "exactly"
RECEIVE_SIZE = 1 << 16
MIN_WAIT_S = 0.05  # the shortest socket timeout a deadline leads to (a passed deadline still tries once)


class ConnectionClosedError(ConnectionError):
    """The broker closed the connection (or it was closed here) with requests unanswered."""


class ResponseMismatchError(ProtocolError):
    """A response that does not answer the oldest request in flight (or arrived with none in flight)."""


@dataclass(frozen=True, slots=True)
class PendingRequest:
    """A request sent and not yet answered."""

    correlation_id: int
    api_key: int
    api_version: int


class RequestPipeline:
    """The requests of one connection and their responses, without I/O (see the module's docstring)."""

    def __init__(self, client_id: str | None = DEFAULT_CLIENT_ID) -> None:
        self.client_id = client_id
        self._decoder = FrameDecoder()
        self._in_flight: collections.deque[PendingRequest] = collections.deque()
        self._last_correlation_id = 0

    @property
    def in_flight(self) -> int:
        """How many requests are waiting for their response."""
        return len(self._in_flight)

    def encode(self, api_key: int, api_version: int, body: Any) -> tuple[PendingRequest, bytes]:
        """The next request's frame (size prefix included), now counted as in flight."""
        self._last_correlation_id += 1
        pending = PendingRequest(self._last_correlation_id, int(api_key), api_version)
        frame = encode_request(api_key, api_version, pending.correlation_id, self.client_id, body)
        self._in_flight.append(pending)
        return pending, frame

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Bytes received from the broker."""
        self._decoder.feed(data)

    def next_response(self) -> tuple[PendingRequest, Any] | None:
        """The oldest request in flight and its decoded response, or None until its frame is complete."""
        frame = self._decoder.next_frame()
        if frame is None:
            return None
        if not self._in_flight:
            raise ResponseMismatchError("a response arrived with no request in flight")
        pending = self._in_flight.popleft()
        answered, body = decode_response(pending.api_key, pending.api_version, frame)
        if answered != pending.correlation_id:
            raise ResponseMismatchError(f"response to request {answered}, expected {pending.correlation_id}")
        return pending, body


class KafkaConnection:
    """A blocking connection to one broker (see the module's docstring)."""

    def __init__(self, sock: socket.socket, client_id: str | None = DEFAULT_CLIENT_ID) -> None:
        self._sock: socket.socket | None = sock
        self._pipeline = RequestPipeline(client_id)

    @classmethod
    def open(
        cls,
        host: str,
        port: int,
        *,
        security: ClientSecurity | None = None,
        client_id: str | None = DEFAULT_CLIENT_ID,
        timeout: float | None = 30.0,
        deadline: float | None = None,
    ) -> KafkaConnection:
        """Connect (and do TLS and SASL as `security` says). `timeout`: the socket's timeout (None: block),
        unless `deadline` is given, which then bounds every step. The socket is closed on failure."""
        wait = _remaining(deadline) if deadline is not None else timeout
        sock = socket.create_connection((host, port), timeout=wait)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if security is None:
                return cls(sock, client_id)
            sock = security.wrap(sock, host)
            connection = cls(sock, client_id)
            security.authenticate(
                lambda api_key, api_version, body: connection.request(
                    api_key, api_version, body, deadline=deadline
                )
            )
            return connection
        except BaseException:
            sock.close()
            raise

    @property
    def in_flight(self) -> int:
        """Requests sent whose responses are not received yet."""
        return self._pipeline.in_flight

    def send(self, api_key: int, api_version: int, body: Any, *, deadline: float | None = None) -> int:
        """Write a request without waiting for its response; returns its correlation id."""
        sock = self._ready(deadline)
        pending, frame = self._pipeline.encode(api_key, api_version, body)
        sock.sendall(frame)
        return pending.correlation_id

    def receive(self, *, deadline: float | None = None) -> Any:
        """The response to the oldest request in flight (waiting for it)."""
        if not self._pipeline.in_flight:
            raise RuntimeError("receive() with no request in flight")
        while (answer := self._pipeline.next_response()) is None:
            data = self._ready(deadline).recv(RECEIVE_SIZE)
            if not data:
                raise ConnectionClosedError(
                    f"connection closed by the broker with {self._pipeline.in_flight} requests unanswered"
                )
            self._pipeline.feed(data)
        return answer[1]

    def request(self, api_key: int, api_version: int, body: Any, *, deadline: float | None = None) -> Any:
        """Send one request and wait for its response (nothing else may be in flight)."""
        if self._pipeline.in_flight:
            raise RuntimeError(f"request() with {self._pipeline.in_flight} pipelined requests unanswered")
        self.send(api_key, api_version, body, deadline=deadline)
        return self.receive(deadline=deadline)

    def _ready(self, deadline: float | None) -> socket.socket:
        sock = self._sock
        if sock is None:
            raise ConnectionClosedError("the connection is closed")
        if deadline is not None:
            sock.settimeout(_remaining(deadline))
        return sock

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class ConnectionPool:
    """One open blocking connection per broker address (see the module's docstring)."""

    def __init__(self, *, client_id: str | None, security: ClientSecurity | None = None) -> None:
        self._client_id = client_id
        self._security = security
        self._open: dict[str, KafkaConnection] = {}

    def get(self, address: str, deadline: float) -> KafkaConnection:
        """The connection to `address` ("host:port"), opened if needed (ValueError: not host:port)."""
        connection = self._open.get(address)
        if connection is None:
            host, _, port = address.rpartition(":")
            connection = KafkaConnection.open(
                host.strip("[]") or "localhost",
                int(port),
                security=self._security,
                client_id=self._client_id,
                deadline=deadline,
            )
            self._open[address] = connection
        return connection

    def any_open(self) -> tuple[str, KafkaConnection] | None:
        """Some open connection and its address, if there is one."""
        return next(iter(self._open.items()), None)

    def is_open(self, address: str) -> bool:
        return address in self._open

    def drop(self, address: str) -> None:
        """Close and forget the connection to `address` (after it failed)."""
        connection = self._open.pop(address, None)
        if connection is not None:
            connection.close()

    def close(self) -> None:
        for address in list(self._open):
            self.drop(address)


def _remaining(deadline: float) -> float:
    return max(MIN_WAIT_S, deadline - time.monotonic())


class AsyncKafkaConnection:
    """A connection to one broker on asyncio streams (see the module's docstring)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client_id: str | None = DEFAULT_CLIENT_ID,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._pipeline = RequestPipeline(client_id)
        self._waiting: collections.deque[asyncio.Future[Any]] = collections.deque()
        self._failure: Exception | None = None
        self._task = asyncio.create_task(self._read())

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        client_id: str | None = DEFAULT_CLIENT_ID,
        security: ClientSecurity | None = None,
    ) -> AsyncKafkaConnection:
        """Connect (TCP_NODELAY), then TLS and SASL as `security` says (SaslRefusedError when the broker
        refuses the credentials; ssl.SSLError when the handshake fails). Closed again on failure."""
        tls = security is not None and security.protocol.tls
        if security is not None and tls:
            reader, writer = await asyncio.open_connection(
                host, port, ssl=security.ssl_context(), server_hostname=host
            )
        else:
            reader, writer = await asyncio.open_connection(host, port)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = cls(reader, writer, client_id)
        if security is None:
            return connection
        try:
            await security.authenticate_async(connection.request)
        except BaseException:
            connection.close()
            raise
        return connection

    async def request(self, api_key: int, api_version: int, body: Any) -> Any:
        """Send one request (without waiting for earlier ones) and wait for its response."""
        if self._failure is not None:
            raise self._failure
        _, frame = self._pipeline.encode(api_key, api_version, body)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        self._writer.write(frame)
        return await future

    async def _read(self) -> None:
        try:
            while True:
                data = await self._reader.read(RECEIVE_SIZE)
                if not data:
                    raise ConnectionClosedError(
                        f"connection closed by the broker with {len(self._waiting)} requests unanswered"
                    )
                self._pipeline.feed(data)
                while (answer := self._pipeline.next_response()) is not None:
                    future = self._waiting.popleft()
                    if not future.done():  # else its caller was cancelled
                        future.set_result(answer[1])
        except (ConnectionError, ProtocolError) as e:
            self._failure = e
            while self._waiting:
                future = self._waiting.popleft()
                if not future.done():
                    future.set_exception(e)

    def close(self) -> None:
        self._task.cancel()
        self._writer.close()
