"""The broker process: listen, frame, decode, dispatch, encode, write.

One `Connection` per client socket. Requests on a connection are started in arrival order (each becomes an
asyncio task, and tasks start in the order they are created, so the synchronous part of each handler —
an append, a coordinator transition — runs in request order) and their responses are written in the same
order, while later requests may already be running (pipelining: a Produce waiting for its fsync does not
stop the next one from appending). Produce with acks=0 gets no response, as in Kafka.

Bad input closes only the connection it came on: an unparseable frame, a frame over
`socket.request.max.bytes`, an API we do not serve (except ApiVersions, which answers
UNSUPPORTED_VERSION with its v0 body so the client can retry with a version we know).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from typing import Any

from exactly.broker.config import BrokerConfig
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import HANDLERS, advertised
from exactly.clock import Clock, SystemClock
from exactly.cluster.metadata import ClusterMetadata, TopicInfo
from exactly.errors import ErrorCode, ProtocolError
from exactly.protocol import primitives as p
from exactly.protocol.api import RequestHeader, UnsupportedVersionError, decode_request, encode_response
from exactly.protocol.framing import FrameDecoder
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse

log = logging.getLogger(__name__)

_READ_SIZE = 1 << 18
_MAX_IN_FLIGHT = 64  # requests read ahead of their responses, per connection


class Broker:
    """Everything a handler can reach, and the listening socket."""

    def __init__(self, config: BrokerConfig, clock: Clock | None = None) -> None:
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.metadata = ClusterMetadata(config.data_dir)
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)
        self._stopped = asyncio.Event()

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def advertised_host_port(self) -> tuple[str, int]:
        host, port = self.config.advertised
        return host, (port or self.port)

    async def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicInfo:
        return self.metadata.create_topic(name, partitions, configs)

    async def start(self) -> None:
        host, port = self.config.listen
        self._server = await asyncio.start_server(
            self._accept, host, port, limit=_READ_SIZE, reuse_address=True
        )
        log.info("exactly broker %d listening on %s:%d", self.config.node_id, host, self.port)

    async def serve_until_stopped(self) -> None:
        await self._stopped.wait()

    def request_stop(self) -> None:
        self._stopped.set()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        self.metadata.close()
        log.info("exactly broker %d stopped", self.config.node_id)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await Connection(self, reader, writer, next(self._ids)).run()
        finally:
            self._connections.discard(task)


class Connection:
    def __init__(
        self, broker: Broker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, connection_id: int
    ) -> None:
        self.broker = broker
        self.reader = reader
        self.writer = writer
        self.id = connection_id
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    async def run(self) -> None:
        config = self.broker.config
        decoder = FrameDecoder(config.socket_request_max_bytes)
        pending: asyncio.Queue[asyncio.Future[list[p.Chunk] | None] | None] = asyncio.Queue(_MAX_IN_FLIGHT)
        writer_task = asyncio.create_task(self._write_responses(pending))
        idle = config.connections_max_idle_ms / 1000 if config.connections_max_idle_ms > 0 else None
        try:
            while not writer_task.done():
                try:
                    data = await asyncio.wait_for(self.reader.read(_READ_SIZE), idle)
                except TimeoutError:
                    log.info("closing idle connection %s", self.peer)
                    break
                if not data:
                    break
                for frame in decoder.frames(data):
                    await pending.put(self._dispatch(frame))
        except ProtocolError as e:
            log.warning("closing connection %s: %s", self.peer, e)
            writer_task.cancel()
        except (ConnectionError, asyncio.IncompleteReadError) as e:
            log.debug("connection %s lost: %s", self.peer, e)
            writer_task.cancel()
        finally:
            if not writer_task.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await pending.put(None)
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await writer_task
            self.writer.close()

    def _dispatch(self, frame: bytes) -> asyncio.Future[list[p.Chunk] | None]:
        try:
            header, body = decode_request(frame)
        except ProtocolError as e:
            if log.isEnabledFor(logging.DEBUG):
                log.debug("undecodable frame from %s: %s", self.peer, frame[:512].hex())
            if not isinstance(e, UnsupportedVersionError):
                raise
            if e.header.api_key != ApiKey.API_VERSIONS:
                raise
            return _done(_unsupported_api_versions(e.header))
        handler = HANDLERS.get(ApiKey(header.api_key))
        if handler is None:
            raise ProtocolError(f"no handler for {ApiKey(header.api_key).name} v{header.api_version}")
        context = RequestContext(self.broker, header, self.id, self.peer)
        return asyncio.ensure_future(self._run(handler, context, body))

    async def _run(self, handler: Any, context: RequestContext, body: Any) -> list[p.Chunk] | None:
        response = await handler(context, body)
        if response is None:
            return None
        return encode_response(context.header, response)

    async def _write_responses(
        self, pending: asyncio.Queue[asyncio.Future[list[p.Chunk] | None] | None]
    ) -> None:
        while (future := await pending.get()) is not None:
            try:
                chunks = await future
            except Exception:
                log.exception("request on connection %s failed; closing it", self.peer)
                self.writer.close()
                raise
            if chunks is None:
                continue
            self.writer.writelines(chunks)
            if self.writer.transport.get_write_buffer_size() > (1 << 20):
                await self.writer.drain()


def _done(value: list[p.Chunk]) -> asyncio.Future[list[p.Chunk] | None]:
    future: asyncio.Future[list[p.Chunk] | None] = asyncio.get_running_loop().create_future()
    future.set_result(value)
    return future


def api_versions_body(error: ErrorCode = ErrorCode.NONE) -> ApiVersionsResponse:
    keys = [ApiVersion(int(key), lo, hi) for key, (lo, hi) in advertised().items()]
    return ApiVersionsResponse(error_code=error, api_keys=keys)


def _unsupported_api_versions(header: RequestHeader) -> list[p.Chunk]:
    """Kafka answers an ApiVersions version it doesn't know with a v0 body: error 35 and its ranges."""
    v0 = header._replace(api_version=0)
    return encode_response(v0, api_versions_body(ErrorCode.UNSUPPORTED_VERSION))
