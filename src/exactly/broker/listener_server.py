"""The server of one listener: accept within the connection slots, handshake (TLS), hand the client over.

Accepting is our own loop over `loop.sock_accept` rather than `asyncio.start_server`, for two reasons:

* Connection slots (exactly.broker.connection_slots): while `max.connections` connections (or the
  open-file limit's share for connections) are open, the loop accepts nothing, as Kafka's Acceptor
  waits for a slot (the broker-wide limit, or the listener's own `listener.name.<l>.max.connections`);
  new clients wait in the listen backlog and are accepted as slots free up. A client address holding
  `max.connections.per.ip` connections already has its new one closed right after accept. A failed
  accept (EMFILE, ENFILE, ENOBUFS) is one WARNING per episode and a retry after a short pause; asyncio's
  server and uvloop's would drop or refuse such connections without a word.
* TLS (SSL, SASL_SSL): each accepted socket gets its handshake from `loop.connect_accepted_socket(...,
  ssl=context, ssl_handshake_timeout=...)`, which returns once the handshake is done and raises when it
  fails. asyncio and uvloop's own servers drop a failed or timed-out handshake without telling the
  application; and upgrading a plain stream with `start_tls` loses the ClientHello under uvloop, which
  starts reading before a protocol can pause it. Here a failed handshake (a plaintext client, no or an
  untrusted client certificate, a timeout) is one INFO line and touches nothing else; a client
  certificate whose DN no `ssl.principal.mapping.rules` rule maps is refused the same way. The context is
  taken from `TlsListener.context` for each connection, so new key or trust store files apply to the
  next connection (see exactly.security.tls).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
from collections.abc import Awaitable, Callable

from exactly.broker.connection_slots import ConnectionSlots
from exactly.broker.frame_stream import FrameStream
from exactly.protocol.framing import FramePool
from exactly.security.principal import ANONYMOUS, KafkaPrincipal
from exactly.security.tls import HANDSHAKE_TIMEOUT_S, TlsListener

log = logging.getLogger(__name__)

# The reader is a FrameStream when the server was given `max_frame_size`, else an asyncio.StreamReader.
OnConnection = Callable[
    [asyncio.StreamReader | FrameStream, asyncio.StreamWriter, KafkaPrincipal], Awaitable[None]
]

BACKLOG = 1024
ACCEPT_RETRY_S = 0.1  # after a failed accept (out of descriptors): the next try
_OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class ListenerServer:
    """What the broker needs of an `asyncio.Server` (`sockets`, `close`, `wait_closed`)."""

    def __init__(
        self,
        name: str,
        socks: list[socket.socket],
        tls: TlsListener | None,
        slots: ConnectionSlots,
        on_connection: OnConnection,
        limit: int,
        max_frame_size: int | None = None,
    ) -> None:
        """`limit`: the reader's buffer limit; `max_frame_size`: read Kafka frames (`FrameStream`) of at
        most this size instead of a byte stream."""
        self._name = name
        self._max_frame_size = max_frame_size
        self._frame_pool = FramePool()  # large request frames' buffers, shared by the connections
        self._socks = socks
        # the port the first socket is bound to (a configured 0 resolved), asked on every Metadata
        # request: read once, not with a getsockname(2) each time
        self.port: int = socks[0].getsockname()[1] if socks else 0
        self._tls = tls
        self._slots = slots
        self._on_connection = on_connection
        self._limit = limit
        self._handshaking: set[asyncio.Task[None]] = set()
        self._accepting = [asyncio.create_task(self._accept_loop(sock)) for sock in socks]

    @classmethod
    async def start(
        cls,
        name: str,
        host: str,
        port: int,
        tls: TlsListener | None,
        slots: ConnectionSlots,
        on_connection: OnConnection,
        limit: int,
        max_frame_size: int | None = None,
    ) -> ListenerServer:
        return cls(name, await _bind(host, port), tls, slots, on_connection, limit, max_frame_size)

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        return tuple(self._socks)

    def close(self) -> None:
        """Stop accepting; connections being handshaken are dropped (served ones end with the broker)."""
        for task in [*self._accepting, *self._handshaking]:
            task.cancel()
        for sock in self._socks:
            with contextlib.suppress(OSError):
                sock.close()

    async def wait_closed(self) -> None:
        await asyncio.gather(*self._accepting, return_exceptions=True)

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        failing_since: float | None = None
        failures = 0
        while True:
            await self._slots.wait_for_slot(self._name)
            try:
                client, address = await loop.sock_accept(sock)
            except ConnectionAbortedError:  # the client reset before it was accepted: nothing to serve
                log.debug("listener %s: a connection was reset before it was accepted", self._name)
                continue
            except OSError as e:
                if e.errno not in _OUT_OF_RESOURCES:
                    log.warning("listener %s: accept failed: %s", self._name, e)
                    await asyncio.sleep(ACCEPT_RETRY_S)
                    continue
                failures += 1
                if failing_since is None:
                    failing_since = loop.time()
                    log.warning(
                        "listener %s: cannot accept a connection: %s (%d connections open); retrying "
                        "every %.1f s, new clients wait in the backlog (raise the open-file limit or lower "
                        "max.connections or exactly.log.max.open.files)",
                        self._name,
                        e.strerror or e,
                        self._slots.open,
                        ACCEPT_RETRY_S,
                    )
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            if failing_since is not None:
                log.warning(
                    "listener %s: accepting again after %.1f s and %d failed accepts",
                    self._name,
                    loop.time() - failing_since,
                    failures,
                )
                failing_since, failures = None, 0
            ip = address[0] if isinstance(address, tuple) else None
            if ip is not None and not self._slots.admit(ip):
                log.info(
                    "listener %s: rejected connection from %s, address already has the configured maximum "
                    "of %d connections (max.connections.per.ip, max.connections.per.ip.overrides)",
                    self._name,
                    ip,
                    self._slots.per_ip.limit(ip),
                )
                with contextlib.suppress(OSError):
                    client.close()
                continue
            self._slots.opened(self._name)
            task = asyncio.create_task(self._serve(client, address, ip))
            self._handshaking.add(task)

    async def _serve(self, client: socket.socket, address: object, ip: str | None) -> None:
        try:
            await self._serve_in_slot(client, address)
        finally:
            self._slots.release(self._name, ip)

    async def _serve_in_slot(self, client: socket.socket, address: object) -> None:
        loop = asyncio.get_running_loop()
        peer = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else "unknown"
        reader = asyncio.StreamReader(limit=self._limit, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        frames = None
        if self._max_frame_size is not None:
            frames = FrameStream(protocol, self._limit, self._max_frame_size, self._frame_pool)
        try:
            if self._tls is None:
                transport, _ = await loop.connect_accepted_socket(lambda: frames or protocol, client)
            else:
                transport, _ = await loop.connect_accepted_socket(
                    lambda: frames or _Decrypted(protocol, self._limit),
                    client,
                    ssl=self._tls.context(loop.time()),
                    ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S,
                )
        except (OSError, TimeoutError, EOFError) as e:
            what = "TLS handshake" if self._tls is not None else "connection"
            log.info("%s with %s on listener %s failed: %s", what, peer, self._name, _one_line(e))
            with contextlib.suppress(OSError):
                client.close()
            return
        finally:
            task = asyncio.current_task()
            if task is not None:
                self._handshaking.discard(task)
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        principal = ANONYMOUS
        if self._tls is not None:
            try:
                principal = self._tls.principal(writer.get_extra_info("ssl_object"))
            except ValueError as e:  # NoMatchingRule, CertificateFormatError
                log.info("TLS client authentication of %s on listener %s failed: %s", peer, self._name, e)
                transport.abort()
                return
        await self._on_connection(reader if frames is None else frames, writer, principal)


async def _bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets as `asyncio.start_server` binds them: every interface (IPv6 too where the system
    can) for an empty host, else each address the host resolves to (`localhost`: 127.0.0.1 and ::1)."""
    if not host:
        if socket.has_dualstack_ipv6():
            socks = [
                socket.create_server(("", port), family=socket.AF_INET6, backlog=BACKLOG, dualstack_ipv6=True)
            ]
        else:
            socks = [socket.create_server(("", port), backlog=BACKLOG)]
    else:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        socks = []
        try:
            for family, address in dict.fromkeys((info[0], info[4]) for info in infos):
                if socks and port == 0:  # port 0: every address gets the port the first one was given
                    address = (address[0], socks[0].getsockname()[1], *address[2:])
                socks.append(socket.create_server(address, family=family, backlog=BACKLOG))
        except OSError:
            for sock in socks:
                sock.close()
            raise
    for sock in socks:
        sock.setblocking(False)
    return socks


class _Decrypted(asyncio.BufferedProtocol):
    """Hands decrypted bytes to a stream protocol through one reused buffer.

    uvloop's TLS layer calls SSL_read once per TLS record (librdkafka sends records of about 2 KB); for a
    plain `Protocol` each call allocates a 256 KiB bytes object and the pieces are joined, for a
    `BufferedProtocol` the records are decrypted one after the other into this buffer and handed over in
    one piece. (uvloop takes the buffered path only for a protocol that is not an `asyncio.Protocol`,
    hence this adapter rather than a subclass of StreamReaderProtocol.)"""

    def __init__(self, stream: asyncio.StreamReaderProtocol, size: int) -> None:
        self._stream = stream
        self._buffer = memoryview(bytearray(size))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._stream.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stream.connection_lost(exc)

    def pause_writing(self) -> None:
        self._stream.pause_writing()

    def resume_writing(self) -> None:
        self._stream.resume_writing()

    def eof_received(self) -> bool | None:
        return self._stream.eof_received()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._buffer

    def buffer_updated(self, nbytes: int) -> None:
        self._stream.data_received(self._buffer[:nbytes])  # type: ignore[arg-type]


def _one_line(error: BaseException) -> str:
    reason = getattr(error, "reason", None)
    text = str(reason) if isinstance(reason, str) and reason else (str(error) or type(error).__name__)
    return " ".join(text.split())
