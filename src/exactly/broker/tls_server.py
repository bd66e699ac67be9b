"""The server of a TLS listener (SSL, SASL_SSL): accept, handshake, name the client, hand it to the broker.

Each accepted socket gets its TLS handshake from `loop.connect_accepted_socket(..., ssl=context,
ssl_handshake_timeout=...)`, which returns once the handshake is done and raises when it fails. Serving
with `asyncio.start_server(ssl=...)` would be shorter, but asyncio and uvloop drop a failed or timed-out
handshake without telling the application; and upgrading a plain stream with `start_tls` loses the
ClientHello under uvloop, which starts reading before a protocol can pause it. Here a failed handshake (a
plaintext client, no or an untrusted client certificate, a timeout) is one INFO line and touches nothing
else; a client certificate whose DN no `ssl.principal.mapping.rules` rule maps is refused the same way.

The context is taken from `TlsListener.context` for each connection, so new key or trust store files
apply to the next connection (see exactly.security.tls).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable

from exactly.security.principal import KafkaPrincipal
from exactly.security.tls import HANDSHAKE_TIMEOUT_S, TlsListener

log = logging.getLogger(__name__)

OnConnection = Callable[[asyncio.StreamReader, asyncio.StreamWriter, KafkaPrincipal], Awaitable[None]]


class TlsServer:
    """What the broker needs of an `asyncio.Server` (`sockets`, `close`, `wait_closed`), for TLS."""

    def __init__(
        self, sock: socket.socket, tls: TlsListener, on_connection: OnConnection, limit: int
    ) -> None:
        self._sock = sock
        self._tls = tls
        self._on_connection = on_connection
        self._limit = limit
        self._handshaking: set[asyncio.Task[None]] = set()
        self._accepting = asyncio.create_task(self._accept_loop())

    @classmethod
    async def start(
        cls, host: str, port: int, tls: TlsListener, on_connection: OnConnection, limit: int
    ) -> TlsServer:
        if not host:  # every interface, IPv6 too where the system can (as asyncio.start_server binds)
            if socket.has_dualstack_ipv6():
                sock = socket.create_server(
                    ("", port), family=socket.AF_INET6, backlog=1024, dualstack_ipv6=True
                )
            else:
                sock = socket.create_server(("", port), backlog=1024)
        else:
            loop = asyncio.get_running_loop()
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
            sock = socket.create_server(infos[0][4], family=infos[0][0], backlog=1024)
        sock.setblocking(False)
        return cls(sock, tls, on_connection, limit)

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        return (self._sock,)

    def close(self) -> None:
        """Stop accepting; connections being handshaken are dropped (served ones end with the broker)."""
        self._accepting.cancel()
        for task in self._handshaking:
            task.cancel()
        with contextlib.suppress(OSError):
            self._sock.close()

    async def wait_closed(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await self._accepting

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                client, address = await loop.sock_accept(self._sock)
            except OSError as e:  # EMFILE and friends: wait a little, as asyncio's own server does
                log.warning("listener %s: accept failed: %s", self._tls.settings.listener, e)
                await asyncio.sleep(1.0)
                continue
            task = asyncio.create_task(self._serve(client, address))
            self._handshaking.add(task)

    async def _serve(self, client: socket.socket, address: object) -> None:
        loop = asyncio.get_running_loop()
        peer = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else "unknown"
        listener = self._tls.settings.listener
        reader = asyncio.StreamReader(limit=self._limit, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        try:
            transport, _ = await loop.connect_accepted_socket(
                lambda: _Decrypted(protocol, self._limit),
                client,
                ssl=self._tls.context(loop.time()),
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S,
            )
        except (OSError, TimeoutError, EOFError) as e:
            log.info("TLS handshake with %s on listener %s failed: %s", peer, listener, _one_line(e))
            with contextlib.suppress(OSError):
                client.close()
            return
        finally:
            task = asyncio.current_task()
            if task is not None:
                self._handshaking.discard(task)
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        try:
            principal = self._tls.principal(writer.get_extra_info("ssl_object"))
        except ValueError as e:  # NoMatchingRule, CertificateFormatError
            log.info("TLS client authentication of %s on listener %s failed: %s", peer, listener, e)
            transport.abort()
            return
        await self._on_connection(reader, writer, principal)


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
