"""One client connection: read frames, run the requests, write the responses in order, end quietly.

Wire: Kafka frames both ways (`int32 size` + body, `exactly.protocol.framing`); responses go out in the
order their requests came in.

A connection is three tasks, all owned by `Connection.run`, which never raises:

* the reader: socket -> `FrameDecoder` -> one handler task per request, started in arrival order (so
  the synchronous part of each handler — an append, a coordinator transition — runs in request order)
  -> the `pending` queue. At most `_MAX_IN_FLIGHT` requests wait for their responses: when the queue is
  full the reader stops reading, its buffer fills and TCP flow control stops the client.
* the writer: awaits each pending request in order and writes its response, with the responses already
  encoded right behind it in the same write (a pipelining client's, ready in one loop turn). When the
  transport holds more than `_WRITE_BUFFER_HIGH` unsent bytes it waits for the peer to read them
  (drain). A client that does not read therefore costs at most the in-flight limit, the write buffer and
  the read buffer.
* `run` itself, which waits for the first of: the reader ends, the writer ends, or `close()`.

Then the other task is cancelled, every request still in flight is cancelled (nobody will read its
answer; a parked long-poll Fetch or JoinGroup included), and the transport is aborted (a graceful close
would wait forever to flush to a peer that does not read). `run` returns an `Ending` that says why, and
the broker logs one line for it: DEBUG for a peer that went away, idled out or a shutdown, WARNING for
bad input; a handler that raised (a bug) is logged with its traceback when it fails.

How a vanished peer is noticed: a read that returns EOF (also in the middle of a frame) or fails, a write
or drain to a lost transport, and — while reading is paused because the queue is full, when the transport
cannot see a reset — a look at the socket's TCP state every `_PROBE_S` (`peer_gone`).

SASL listeners (exactly.security.sasl): until the client has authenticated, `_sasl_gate` answers
SaslHandshake / SaslAuthenticate itself and closes the connection on any other request but ApiVersions;
a failed authentication is answered after `connection.failed.authentication.delay.ms`, then closed.

Idle (`connections.max.idle.ms`, Kafka's default 10 min): nothing read, no write progress and no request
being handled for that long. A peer that stopped reading its responses is idle too, and is closed. One
timer per connection looks at that when the time could be up (and sets itself again otherwise); it
interrupts the reader's wait (`FrameStream.interrupt`), so reads carry no timeout of their own.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import socket
import time
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import advertised, route
from exactly.broker.frame_stream import FrameStream
from exactly.broker.throttling import HandlingTime, throttle_request
from exactly.errors import ErrorCode, KafkaError, ProtocolError
from exactly.metrics.stats import FETCH_CONSUMER, FETCH_FOLLOWER, BrokerStats, RequestTiming
from exactly.protocol import primitives as p
from exactly.protocol.api import RequestHeader, UnsupportedVersionError, decode_request, encode_response
from exactly.protocol.error_response import error_response
from exactly.protocol.framing import Frame
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from exactly.protocol.messages.sasl_authenticate import SaslAuthenticateResponse
from exactly.protocol.messages.sasl_handshake import SaslHandshakeResponse
from exactly.security.listeners import Listener
from exactly.security.principal import ANONYMOUS, KafkaPrincipal
from exactly.security.sasl import Derivation, Derived, IllegalSaslStateError, SaslSession
from exactly.storage.file_slice import FileSlice

if TYPE_CHECKING:
    from exactly.broker.server import Broker

__all__ = ["CloseReason", "Connection", "Ending", "api_versions_body", "peer_gone"]

log = logging.getLogger(__name__)

READ_SIZE = 1 << 18  # also the StreamReader limit: reading pauses at twice this much unread
_MAX_IN_FLIGHT = 64  # requests read ahead of their responses, per connection
_WRITE_BUFFER_HIGH = 1 << 20  # unsent response bytes above which the writer waits for the peer
_PROBE_S = 1.0  # how often a stalled connection looks at its socket, and measures write progress
_REAP_S = 1.0  # how long teardown waits for cancelled handlers to finish

# Linux tcp_states.h: the peer reset the connection (or it timed out), or the peer sent FIN.
_TCP_CLOSE = 7
_TCP_CLOSE_WAIT = 8

Response = list[p.Chunk] | None
Pending = tuple[RequestHeader | None, asyncio.Future[Response], RequestTiming | None]


class CloseReason(Enum):
    PEER_CLOSED = "closed by the client"
    PEER_LOST = "connection lost"
    IDLE = "idle for connections.max.idle.ms"
    NOT_READING = "client not reading its responses for connections.max.idle.ms"
    BAD_REQUEST = "bad request"
    AUTHENTICATION_FAILED = "authentication failed"
    REQUEST_FAILED = "a request failed"
    SHUTDOWN = "broker shutting down"
    INTERNAL_ERROR = "internal error"

    @property
    def level(self) -> int:
        """The level of the line that reports a connection closed for this reason."""
        if self is CloseReason.BAD_REQUEST:
            return logging.WARNING
        if self in (CloseReason.REQUEST_FAILED, CloseReason.INTERNAL_ERROR):
            return logging.ERROR
        return logging.DEBUG


@dataclass(frozen=True, slots=True)
class Ending:
    reason: CloseReason
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.reason.value}: {self.detail}" if self.detail else self.reason.value


def peer_gone(sock: Any) -> bool:
    """Whether the kernel says the peer of this TCP socket reset it or closed its side (Linux TCP_INFO;
    False where that is not available). Kafka clients never half-close, so FIN means gone."""
    tcp_info = getattr(socket, "TCP_INFO", None)
    if tcp_info is None or sock is None:
        return False
    try:
        state = sock.getsockopt(socket.IPPROTO_TCP, tcp_info, 8)[0]
    except (OSError, ValueError):  # ValueError: uvloop's socket of a closed transport has fd -1
        return True
    return state in (_TCP_CLOSE, _TCP_CLOSE_WAIT)


class Connection:
    def __init__(
        self,
        broker: Broker,
        reader: FrameStream,
        writer: asyncio.StreamWriter,
        connection_id: int,
        listener: Listener | None = None,
    ) -> None:
        self.broker = broker
        self.reader = reader
        self.writer = writer
        self.id = connection_id
        self.listener = listener  # None: the first (tests that build a Connection by hand)
        self.principal = ANONYMOUS  # replaced once TLS client authentication or SASL has proved who it is
        # SASL listeners: requests pass `_sasl_gate` until authenticated (exactly.security.sasl)
        self.sasl: SaslSession | None = broker.sasl_session(listener)
        self._requests: set[asyncio.Future[Response]] = set()  # dispatched, not yet taken by the writer
        # requests in arrival order, waiting for the writer (at most _MAX_IN_FLIGHT): a deque and two
        # waiters, not an asyncio.Queue, whose put/get cost ~8 Python calls per request
        self._pending: collections.deque[Pending] = collections.deque()
        self._writer_waits: asyncio.Future[None] | None = None  # the writer waits for a request
        self._reader_waits: asyncio.Future[None] | None = None  # the reader waits for room
        self._stats: BrokerStats | None = broker.stats  # None: metrics off, nothing timed or counted
        self._closed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()  # set by close()
        self._loop = asyncio.get_running_loop()
        self._last_activity = self._loop.time()
        self._draining = False  # the writer waits for the peer to read
        self._muted_until = 0.0  # loop time before which nothing more is read (quota throttling)
        idle_ms = broker.config.connections_max_idle_ms
        self._idle_s = idle_ms / 1000 if idle_ms > 0 else None
        self._idle_timer: asyncio.TimerHandle | None = None
        peer = writer.get_extra_info("peername")
        # No peer name when the client reset the connection before it was accepted.
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else "unknown"
        self._socket = writer.get_extra_info("socket")
        # Fetch answers records from the segment files with sendfile(2): plaintext sockets only
        self.zero_copy = (
            hasattr(os, "sendfile")
            and self._socket is not None
            and writer.get_extra_info("ssl_object") is None
        )
        self._send_fd = -1  # a duplicate of the socket's descriptor, to wait for it to be writable
        # testing only (broker/config.py), static: read once, not on every request
        config = broker.config
        self._debug_principals = config.debug_principal_by_client_id
        self._debug_raise = config.debug_raise_in_api
        self._debug_unencodable = config.debug_unencodable_response_in_api
        if not writer.transport.is_closing():  # uvloop raises on a transport already lost
            writer.transport.set_write_buffer_limits(high=_WRITE_BUFFER_HIGH)

    # --- lifetime ---------------------------------------------------------------------------------------

    async def run(self) -> Ending:
        """Serve until the peer goes, the connection idles out, bad input, or `close()`; never raises."""
        reader = asyncio.create_task(self._read_requests())
        writer = asyncio.create_task(self._write_responses())
        ending = Ending(CloseReason.SHUTDOWN)
        try:
            waits: list[asyncio.Future[Any]] = [reader, writer, self._closed]
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for task in (reader, writer):
                if task in done:
                    ending = self._ending_of(task)
                    break
        except asyncio.CancelledError:
            pass  # the loop is shutting down: end like close()
        finally:
            await self._teardown(reader, writer)
        return ending

    def mute(self, ms: int) -> None:
        """Read nothing more from this client for `ms` (Kafka mutes a throttled client's channel)."""
        self._muted_until = max(self._muted_until, self._loop.time() + ms / 1000)

    def close(self) -> None:
        """Shut down: `run` cancels the in-flight requests, aborts the socket and returns."""
        if not self._closed.done():
            self._closed.set_result(None)

    def _ending_of(self, task: asyncio.Task[Ending]) -> Ending:
        if task.cancelled():
            return Ending(CloseReason.SHUTDOWN)
        error = task.exception()
        if error is None:
            return task.result()
        log.error("connection %d from %s failed", self.id, self.peer, exc_info=error)
        return Ending(CloseReason.INTERNAL_ERROR, repr(error))

    async def _teardown(self, reader: asyncio.Task[Ending], writer: asyncio.Task[Ending]) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        reader.cancel()
        writer.cancel()
        requests = list(self._requests)
        self._requests.clear()
        for future in requests:
            future.cancel()
        self.writer.transport.abort()
        if self._send_fd >= 0:
            os.close(self._send_fd)
            self._send_fd = -1
        everything: list[asyncio.Future[Any]] = [reader, writer, *requests]
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait(everything, timeout=_REAP_S)
        for future in requests:
            if future.done() and not future.cancelled() and (error := future.exception()) is not None:
                log.error("request on closed connection %d failed", self.id, exc_info=error)

    def _touch(self) -> None:
        self._last_activity = self._loop.time()

    def _idle_ending(self) -> Ending | None:
        """`connections.max.idle.ms` passed with nothing read, no write progress and no request running."""
        if self._idle_s is None:
            return None
        if any(not future.done() for future in self._requests):
            self._touch()
            return None
        if self._loop.time() - self._last_activity < self._idle_s:
            return None
        return Ending(CloseReason.NOT_READING if self._draining else CloseReason.IDLE)

    def _arm_idle_timer(self) -> None:
        if self._idle_s is not None and self._idle_timer is None:
            self._idle_timer = self._loop.call_at(self._last_activity + self._idle_s, self._idle_check)

    def _idle_check(self) -> None:
        """The idle timer: interrupt the reader if the connection idled out, else look again later."""
        self._idle_timer = None
        if self._idle_ending() is not None:
            self.reader.interrupt()  # the reader sees it idle and ends (or, active again, re-arms)
        else:
            self._arm_idle_timer()

    # --- reading ----------------------------------------------------------------------------------------

    async def _read_requests(self) -> Ending:
        pending = self._pending
        self._arm_idle_timer()
        while True:
            try:
                frames = await self.reader.read()
            except TimeoutError:
                if (idle := self._idle_ending()) is not None:
                    return idle
                self._arm_idle_timer()
                continue
            except OSError as e:
                return Ending(CloseReason.PEER_LOST, str(e) or type(e).__name__)
            except ProtocolError as e:  # a frame size outside 0..socket.request.max.bytes
                return Ending(CloseReason.BAD_REQUEST, str(e))
            if not frames:
                partial = self.reader.buffered
                return Ending(
                    CloseReason.PEER_CLOSED, f"in the middle of a frame ({partial} bytes)" if partial else ""
                )
            self._touch()
            # A throttled client's requests wait (those that arrived while it was muted too); close() ends it.
            if (muted := self._muted_until - self._loop.time()) > 0:
                await asyncio.wait([self._closed], timeout=muted)
                if self._closed.done():
                    return Ending(CloseReason.SHUTDOWN)
            try:
                for frame in frames:
                    item = self._dispatch(frame)
                    if len(pending) < _MAX_IN_FLIGHT:
                        self._put(item)
                    elif (stalled := await self._enqueue(item)) is not None:
                        return stalled
            except ProtocolError as e:
                return Ending(CloseReason.BAD_REQUEST, str(e))

    def _put(self, item: Pending) -> None:
        self._pending.append(item)
        waiter = self._writer_waits
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _next(self) -> Pending:
        """The oldest request not yet taken by the writer (waiting for one)."""
        pending = self._pending
        while not pending:
            self._writer_waits = self._loop.create_future()
            try:
                await self._writer_waits
            finally:
                self._writer_waits = None
        item = pending.popleft()
        waiter = self._reader_waits
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        return item

    async def _enqueue(self, item: Pending) -> Ending | None:
        """Wait for room in the full queue. Reading is paused meanwhile, so the transport would not notice
        the peer vanish: look at the socket every `_PROBE_S`."""
        while True:
            if len(self._pending) < _MAX_IN_FLIGHT:
                self._put(item)
                return None
            self._reader_waits = self._loop.create_future()
            try:
                async with asyncio.timeout(_PROBE_S):
                    await self._reader_waits
            except TimeoutError:
                if peer_gone(self._socket):
                    item[1].cancel()
                    return Ending(CloseReason.PEER_LOST, "found closed while its requests waited")
                if (idle := self._idle_ending()) is not None:
                    item[1].cancel()
                    return idle
            finally:
                self._reader_waits = None

    def _dispatch(self, frame: Frame) -> Pending:
        received = time.perf_counter() if self._stats is not None else 0.0
        try:
            header, body = decode_request(frame)
        except ProtocolError as e:
            if log.isEnabledFor(logging.DEBUG):
                log.debug("undecodable frame from %s: %s", self.peer, frame[:512].hex())
            if not isinstance(e, UnsupportedVersionError):
                raise
            if e.header.api_key != ApiKey.API_VERSIONS:
                raise
            config = self.broker.config
            two_phase_commit = config.transaction_two_phase_commit_enable
            unsupported = _unsupported_api_versions(
                e.header, two_phase_commit, config.group_share_enable, config.share_transactional_ack_enable
            )
            return None, _done(unsupported), None  # never fails
        found = route(header.api_key)
        if found is None:  # a codec without a handler
            raise ProtocolError(f"no handler for {ApiKey(header.api_key).name} v{header.api_version}")
        key, handler, max_version = found
        if header.api_version > max_version:
            raise ProtocolError(f"{key.name} v{header.api_version} is not supported")
        principal = self.principal
        if self._debug_principals and header.client_id:
            principal = KafkaPrincipal.user(header.client_id)  # testing only (broker/config.py)
        if self.sasl is not None and self.sasl.intercepts(header.api_key, self._loop.time() * 1000):
            gated = self._sasl_gate(header, body)
            if gated is not None:
                self._requests.add(gated)
                return header, gated, None
        context = RequestContext(
            self.broker,
            header,
            self.id,
            self.peer,
            len(frame),
            self.mute,
            principal,
            self.listener,
            self.zero_copy and key == ApiKey.FETCH,
        )
        timing = None
        if self._stats is not None:
            also = None
            if key == ApiKey.FETCH:  # Kafka's FetchConsumer / FetchFollower request metrics
                state = getattr(body, "replica_state", None)
                replica_id = state.replica_id if state is not None else body.replica_id
                also = FETCH_FOLLOWER if replica_id >= 0 else FETCH_CONSUMER
            timing = RequestTiming(header.api_key, received, also)
            self._stats.received(header.api_key, header.api_version, also)
        # counted for the flusher's inline rule; what it starts is its work (`Handling.answered`)
        future = self.broker.handling.start(self._loop, self._run(handler, context, body, timing))
        self._requests.add(future)
        return header, future, timing

    def _sasl_gate(self, header: RequestHeader, body: Any) -> asyncio.Future[Response] | None:
        """Before authentication: None lets ApiVersions through; SaslHandshake and SaslAuthenticate are
        answered here (a refusal after connection.failed.authentication.delay.ms, then the writer closes);
        anything else closes the connection (ProtocolError). A password check that needs PBKDF2 (PLAIN
        against a stored SCRAM credential) runs in a thread: the event loop serves others meanwhile."""
        session = self.sasl
        assert session is not None
        key = ApiKey(header.api_key)
        try:
            if session.authenticated and key != ApiKey.SASL_HANDSHAKE:
                session.expire(f"{key.name} v{header.api_version}")
            if key == ApiKey.API_VERSIONS:
                session.api_versions()
                return None
            if key == ApiKey.SASL_HANDSHAKE:
                if header.api_version == 0:  # librdkafka needs v0 advertised, but sends v1
                    session.other_request("SaslHandshake v0 (raw tokens without SaslAuthenticate, not built)")
                outcome = session.handshake(body.mechanism)
                response = SaslHandshakeResponse(outcome.error, list(session.mechanisms))
                return self._sasl_answer(header, response, outcome.failure)
            if key == ApiKey.SASL_AUTHENTICATE:
                work = session.start_authenticate(body.auth_bytes)
                if work is None:
                    return self._authenticated(header, body.auth_bytes, None)
                return asyncio.ensure_future(self._authenticated_after(header, body.auth_bytes, work))
            session.other_request(f"{key.name} v{header.api_version}")
            raise AssertionError("unreachable")
        except IllegalSaslStateError as e:
            raise ProtocolError(str(e)) from None

    async def _authenticated_after(self, header: RequestHeader, token: bytes, work: Derivation) -> Response:
        derived = await self._loop.run_in_executor(None, work.run)
        try:
            return await self._authenticated(header, token, derived)
        except IllegalSaslStateError as e:
            raise ProtocolError(str(e)) from None

    def _authenticated(
        self, header: RequestHeader, token: bytes, derived: Derived | None
    ) -> asyncio.Future[Response]:
        session = self.sasl
        assert session is not None
        reauthentications = session.reauthentications
        outcome = session.authenticate(token, self._loop.time() * 1000, derived)
        response = SaslAuthenticateResponse(
            outcome.error, outcome.message, outcome.token, outcome.session_lifetime_ms
        )
        if session.reauthentications > reauthentications:
            log.info("connection %d re-authenticated as %s", self.id, session.principal)
            return _done(encode_response(header, response))
        return self._sasl_answer(header, response, outcome.failure)

    def _sasl_answer(self, header: RequestHeader, response: Any, failure: str) -> asyncio.Future[Response]:
        session = self.sasl
        assert session is not None
        chunks = encode_response(header, response)
        if failure:
            log.info("connection %d from %s: authentication failed (%s)", self.id, self.peer, failure)
            return asyncio.ensure_future(
                self._later(chunks, self.broker.config.failed_authentication_delay_ms)
            )
        if session.principal is not None:
            self.principal = session.principal
            log.info(
                "connection %d from %s authenticated as %s (%s)",
                self.id,
                self.peer,
                self.principal,
                session.mechanism,
            )
        return _done(chunks)

    async def _later(self, chunks: list[p.Chunk], delay_ms: int) -> Response:
        await asyncio.sleep(delay_ms / 1000)
        return chunks

    async def _flush_and_fail(self) -> Ending:
        """After the answer to a failed authentication: let it reach the client (at most 1 s), then close."""
        transport = self.writer.transport
        transport.set_write_buffer_limits(high=0)
        with contextlib.suppress(TimeoutError, OSError):
            async with asyncio.timeout(1.0):
                await self.writer.drain()
        return Ending(CloseReason.AUTHENTICATION_FAILED)

    async def _run(
        self, handler: Any, context: RequestContext, body: Any, timing: RequestTiming | None = None
    ) -> Response:
        timed: HandlingTime[Any] | None = None
        if timing is not None:
            timing.started = time.perf_counter()
        try:
            if self._debug_raise and context.header.api_key in self._debug_raise:
                raise RuntimeError("exactly.debug.raise.in.api")
            # request_percentage quotas and metrics: time the handler's steps (not its waits)
            if timing is not None or self.broker.metadata.client_quotas:
                timed = HandlingTime(handler(context, body))
                response = await timed
            else:
                response = await handler(context, body)
            if self._debug_unencodable and context.header.api_key in self._debug_unencodable:
                response = _Unencodable()
            throttle_request(context, body, response, timed.seconds if timed is not None else 0.0)
            # encoded here, so that a response the handler got wrong is a handler failure too
            chunks = None if response is None else encode_response(context.header, response)
            if timing is not None:
                self._answered(timing, timed, response)
            return chunks
        except ProtocolError:
            raise  # malformed input the handler found: the connection closes, as Kafka does
        except Exception as e:  # noqa: BLE001 (a bug: answered with an error, the connection stays, as in Kafka)
            response = self._error_response(context, body, e)
            if timing is not None:
                self._answered(timing, timed, response)
            if response is None:
                return None
            throttle_request(context, body, response, timed.seconds if timed is not None else 0.0)
            return encode_response(context.header, response)

    def _answered(self, timing: RequestTiming, timed: HandlingTime[Any] | None, response: Any) -> None:
        """Metrics: the handler is done (its response is encoded); count the response's error codes."""
        timing.finished = time.perf_counter()
        timing.local = timed.seconds if timed is not None else 0.0
        assert self._stats is not None
        self._stats.answered(timing, response)

    def _error_response(self, context: RequestContext, body: Any, error: Exception) -> Any:
        """The error response to a request whose handler raised: the KafkaError's own code, otherwise
        UNKNOWN_SERVER_ERROR; one log line (with the traceback the first time a given place fails);
        re-raises when no response can be built (then the connection closes)."""
        code, message = ErrorCode.UNKNOWN_SERVER_ERROR, "unexpected broker error"
        if isinstance(error, KafkaError):
            code, message = error.code, error.message or error.code.name
        where = _raised_at(error)
        coded = isinstance(error, KafkaError)  # an error with its Kafka code needs no traceback
        first = where not in _FAILED_AT and not coded
        _FAILED_AT.add(where)
        log.error(
            "%s from %s failed: %s: %s (at %s); answering %s%s",
            context.request_name,
            self.peer,
            type(error).__name__,
            error,
            where,
            code.name,
            "" if first or coded else " (traceback logged before)",
            exc_info=error if first else None,
        )
        if context.header.api_key == ApiKey.PRODUCE and getattr(body, "acks", -1) == 0:
            return None  # acks=0: the client reads no answer
        try:
            return error_response(ApiKey(context.header.api_key), body, code, message)
        except Exception:
            log.exception("no error response for %s", context.request_name)
            raise error from None

    # --- writing ----------------------------------------------------------------------------------------

    async def _write_responses(self) -> Ending:
        transport = self.writer.transport
        stats = self._stats
        while True:
            header, future, timing = await self._next()
            try:
                chunks = await future
            except asyncio.CancelledError:
                # The error's traceback holds this frame: a local referring to the request's task (whose
                # error this may be) would make a reference cycle that keeps the whole connection (its
                # buffers, its files) until a full collection of the cyclic GC. Same below.
                self._requests.discard(future)
                del future
                if _cancelling():
                    raise
                # The request was cancelled by someone else (a coordinator stopping): nothing to answer.
                return Ending(CloseReason.SHUTDOWN, f"{_describe(header)} cancelled")
            except Exception:
                self._requests.discard(future)
                del future
                log.exception(
                    "%s on connection %d from %s failed; closing it", _describe(header), self.id, self.peer
                )
                return Ending(CloseReason.REQUEST_FAILED, _describe(header))
            self._requests.discard(future)
            if chunks is None:
                if timing is not None and stats is not None:  # acks=0: done once handled
                    now = time.perf_counter()
                    stats.completed(timing, now, now)
                continue
            if transport.is_closing():
                return Ending(CloseReason.PEER_LOST, "while writing a response")
            sent = time.perf_counter() if timing is not None else 0.0
            if header is not None and header.api_key == ApiKey.FETCH and _has_files(chunks):
                if (lost := await self._send_with_files(chunks)) is not None:
                    return lost
            else:
                if self._pending and stats is None and self.sasl is None:
                    self._take_ready(chunks)
                self.writer.writelines(chunks)
            self._touch()
            if timing is not None and stats is not None:
                stats.completed(timing, sent, time.perf_counter())
            if self.sasl is not None and self.sasl.failed:
                return await self._flush_and_fail()
            if transport.get_write_buffer_size() > _WRITE_BUFFER_HIGH and (lost := await self._drain()):
                return lost

    def _take_ready(self, chunks: list[p.Chunk]) -> None:
        """Append to `chunks` the responses queued right behind it that are already encoded, so that the
        responses ready in one loop turn go out in one write (a pipelining client's). Stops at the first
        one not ready, without a response (acks=0), failed, cancelled, or with records to send from a
        file: the writer takes those one at a time as before. Only without metrics (which time each
        response's write) and SASL (which closes the connection right after a failed authentication's
        answer)."""
        pending = self._pending
        while pending:
            header, future, _ = pending[0]
            if not future.done() or future.cancelled() or future.exception() is not None:
                return
            more = future.result()
            if more is None or (header is not None and header.api_key == ApiKey.FETCH and _has_files(more)):
                return
            pending.popleft()
            self._requests.discard(future)
            chunks.extend(more)
            waiter = self._reader_waits
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    async def _send_with_files(self, chunks: list[p.Chunk]) -> Ending | None:
        """A response with records in segment files: the bytes before each file range go out through the
        transport, then, once it has sent them all, the kernel sends the range from the file to the socket
        (sendfile). Each FileSlice is closed once sent (or when the connection gives up)."""
        run: list[p.Chunk] = []
        ending: Ending | None = None
        for chunk in chunks:
            if not isinstance(chunk, FileSlice):
                run.append(chunk)
                continue
            try:
                if ending is None:
                    if not self.zero_copy:  # not expected: the handler sends slices only where they can go
                        run.append(chunk.read())
                    else:
                        if run:
                            self.writer.writelines(run)
                            run = []
                        ending = await self._sendfile(chunk)
            finally:
                chunk.close()
        if run and ending is None:
            self.writer.writelines(run)
        return ending

    async def _sendfile(self, chunk: FileSlice) -> Ending | None:
        transport = self.writer.transport
        if transport.get_write_buffer_size():  # what precedes the range must be on the wire first
            transport.set_write_buffer_limits(high=0)
            try:
                await self.writer.drain()
            except OSError as e:
                return Ending(CloseReason.PEER_LOST, str(e) or type(e).__name__)
            finally:
                if not transport.is_closing():
                    transport.set_write_buffer_limits(high=_WRITE_BUFFER_HIGH)
        if transport.is_closing():
            return Ending(CloseReason.PEER_LOST, "while writing a response")
        sock_fd = self._socket.fileno()
        position, remaining = chunk.position, chunk.size
        while remaining:
            try:
                sent = os.sendfile(sock_fd, chunk.fd, position, remaining)
            except BlockingIOError:
                await self._writable()
                continue
            except OSError as e:
                return Ending(CloseReason.PEER_LOST, str(e) or type(e).__name__)
            if sent == 0:  # the file is shorter than the range: the response cannot be completed
                return Ending(CloseReason.INTERNAL_ERROR, "segment file truncated while a fetch was sent")
            position += sent
            remaining -= sent
            self._touch()
        return None

    async def _writable(self) -> None:
        """Wait until the socket takes more bytes (or fails). The transport owns the socket's descriptor in
        the event loop, so the wait is on a duplicate of it."""
        if self._send_fd < 0:
            self._send_fd = os.dup(self._socket.fileno())
        fd = self._send_fd
        ready: asyncio.Future[None] = self._loop.create_future()

        def writable() -> None:
            if not ready.done():
                ready.set_result(None)

        self._loop.add_writer(fd, writable)
        self._draining = True  # waiting for the peer to read, as in `_drain` (idle: NOT_READING)
        try:
            async with asyncio.timeout(_PROBE_S):
                await ready
        except TimeoutError:
            pass  # look again (a peer that reads nothing is noticed by the idle check)
        finally:
            self._draining = False
            self._loop.remove_writer(fd)

    async def _drain(self) -> Ending | None:
        """Wait until the peer has read enough; each `_PROBE_S` in which it read something is activity
        (the reader closes a connection whose peer reads nothing for connections.max.idle.ms)."""
        transport = self.writer.transport
        unsent = transport.get_write_buffer_size()
        self._draining = True
        try:
            while True:
                try:
                    async with asyncio.timeout(_PROBE_S):
                        await self.writer.drain()
                    return None
                except TimeoutError:
                    now = transport.get_write_buffer_size()
                    if now < unsent:
                        self._touch()
                    unsent = now
                except OSError as e:
                    return Ending(CloseReason.PEER_LOST, str(e) or type(e).__name__)
        finally:
            self._draining = False


class _Unencodable:
    """Testing only (`exactly.debug.unencodable.response.in.api`): a response with none of its fields."""


_FAILED_AT: set[str] = set()  # file:line of handler failures already logged with their traceback


def _raised_at(error: BaseException) -> str:
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "?"
    return f"{tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}"


def _describe(header: RequestHeader | None) -> str:
    if header is None:
        return "ApiVersions (unsupported version)"
    try:
        name = ApiKey(header.api_key).name
    except ValueError:
        name = str(header.api_key)
    return f"{name} v{header.api_version} (correlation id {header.correlation_id})"


def _has_files(chunks: list[Any]) -> bool:
    """Whether a response's chunks hold records to send from a file (the handler's FileSlices ride in a
    list typed as bytes)."""
    return any(type(chunk) is FileSlice for chunk in chunks)


def _cancelling() -> bool:
    """Whether the running task is being cancelled (not only something it awaited)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _done(value: list[p.Chunk]) -> asyncio.Future[Response]:
    future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
    future.set_result(value)
    return future


def api_versions_body(
    error: ErrorCode = ErrorCode.NONE,
    two_phase_commit: bool = True,
    share_groups: bool = False,
    share_txn_acks: bool = False,
) -> ApiVersionsResponse:
    ranges = advertised(two_phase_commit, share_groups, share_txn_acks)
    keys = [ApiVersion(int(key), lo, hi) for key, (lo, hi) in ranges.items()]
    return ApiVersionsResponse(error_code=error, api_keys=keys)


def _unsupported_api_versions(
    header: RequestHeader, two_phase_commit: bool, share_groups: bool, share_txn_acks: bool = False
) -> list[p.Chunk]:
    """Kafka answers an ApiVersions version it doesn't know with a v0 body: error 35 and its ranges."""
    v0 = header._replace(api_version=0)
    return encode_response(
        v0, api_versions_body(ErrorCode.UNSUPPORTED_VERSION, two_phase_commit, share_groups, share_txn_acks)
    )
