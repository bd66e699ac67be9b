"""A Kafka-frame-aware TCP proxy on 127.0.0.1 between clients and a broker, injecting seeded faults."""

from __future__ import annotations

import collections
import contextlib
import random
import select
import socket
import struct
import threading
import time


class FaultProxy:
    """A TCP proxy on 127.0.0.1 between clients and a broker that injects seeded faults.

    For every response frame read from the broker, with probability `drop_response` the frame is
    swallowed and both sides of that connection are closed (the request was processed, the client never
    hears about it). For every chunk of request bytes from the client, with probability `reset` the chunk
    is not forwarded and the connection is reset (RST to the client via SO_LINGER 0, close to the broker),
    so the broker never sees (the rest of) that request. `after_frames` exempts the first response
    frames of each connection (the ApiVersions/Metadata handshake) from drops, and resets start after
    the first response, so that clients get going.
    """

    def __init__(
        self,
        upstream: tuple[str, int],
        seed: int,
        drop_response: float = 0.0,
        reset: float = 0.0,
        after_frames: int = 2,
    ) -> None:
        self.upstream = upstream
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.drop_response = drop_response
        self.reset = reset
        self.after_frames = after_frames
        self.enabled = True
        self.dropped = 0
        self.resets = 0
        self.forwarded = 0
        self.connections = 0
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._socks: set[socket.socket] = set()
        #: the last events (monotonic time, connection number, what), for failure messages
        self.events: collections.deque[tuple[float, int, str]] = collections.deque(maxlen=60)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> FaultProxy:
        t = threading.Thread(target=self._accept_loop, name="proxy-accept", daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self.lock:
            socks = list(self._socks)
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()
        for t in self._threads:
            t.join(5)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _chance(self, p: float) -> bool:
        with self.lock:
            return self.enabled and p > 0 and self.rng.random() < p

    def _accept_loop(self) -> None:
        self._listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self.lock:
                self.connections += 1
                self._socks.update((client, server))
                number = self.connections
            t = threading.Thread(target=self._pump, args=(client, server, number), daemon=True)
            t.start()
            self._threads.append(t)

    def _event(self, conn: int, what: str) -> None:
        self.events.append((time.monotonic(), conn, what))

    def describe(self) -> str:
        """Counters and the last events, for assertion messages."""
        now = time.monotonic()
        lines = [
            f"proxy: {self.connections} connections, {self.forwarded} responses forwarded, "
            f"{self.dropped} dropped, {self.resets} resets"
        ]
        lines += [f"  {t - now:+.3f}s conn {c}: {what}" for t, c, what in list(self.events)]
        return "\n".join(lines)

    def _pump(self, client: socket.socket, server: socket.socket, conn: int = 0) -> None:
        """Requests: forwarded as bytes. Responses: forwarded frame by frame, with faults."""
        buf = bytearray()
        requests = bytearray()
        frames = 0
        try:
            while not self._stop.is_set():
                readable, _, _ = select.select([client, server], [], [], 0.2)
                if client in readable:
                    data = client.recv(1 << 16)
                    if not data:
                        self._event(conn, "client closed")
                        return
                    if frames >= 1 and self._chance(self.reset):
                        with self.lock:
                            self.resets += 1
                        self._event(conn, f"reset while the client sent {len(data)} bytes")
                        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        return
                    server.sendall(data)
                    requests += data
                    while len(requests) >= 12:
                        (size,) = struct.unpack_from(">i", requests)
                        if len(requests) < 4 + size:
                            break
                        api_key, version, correlation_id = struct.unpack_from(">hhi", requests, 4)
                        del requests[: 4 + size]
                        self._event(
                            conn, f"request key {api_key} v{version} corr {correlation_id} ({size} bytes)"
                        )
                if server in readable:
                    data = server.recv(1 << 16)
                    if not data:
                        self._event(conn, "broker closed")
                        return
                    buf += data
                    while len(buf) >= 4:
                        (size,) = struct.unpack_from(">i", buf)
                        if len(buf) < 4 + size:
                            break
                        frame = bytes(buf[: 4 + size])
                        del buf[: 4 + size]
                        frames += 1
                        (correlation_id,) = struct.unpack_from(">i", frame, 4)
                        if frames > self.after_frames and self._chance(self.drop_response):
                            with self.lock:
                                self.dropped += 1
                            self._event(conn, f"dropped response corr {correlation_id} ({size} bytes)")
                            return
                        client.sendall(frame)
                        with self.lock:
                            self.forwarded += 1
                        self._event(conn, f"forwarded response corr {correlation_id} ({size} bytes)")
        except OSError as e:
            self._event(conn, f"socket error {e!r}")
            return
        finally:
            for s in (client, server):
                with contextlib.suppress(OSError):
                    s.close()
            with self.lock:
                self._socks.discard(client)
                self._socks.discard(server)
