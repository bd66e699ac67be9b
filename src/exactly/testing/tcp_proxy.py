"""A byte-level TCP proxy on 127.0.0.1 that can cut a link as a network partition would, for the cluster
fault tests: put between a broker and ZooKeeper (whose protocol exactly.verify.proxy's Kafka-frame-aware
`FaultProxy` does not speak), or between brokers.

It moves bytes both ways, unchanged, one thread per connection. `blackhole(True)` stops moving them on
every connection, old and new (a new connection is accepted and its upstream connection opened, but no
byte crosses): the peers' connections stay open and what they send waits, as packets that TCP keeps
retransmitting across a partition. `blackhole(False)` heals the link: the waiting bytes arrive, late, and
a peer that gave up on its connection meanwhile finds it closed the moment its end of the proxy reads the
close. A close on one side closes the other.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from types import TracebackType

__all__ = ["BlackholeProxy"]

POLL_INTERVAL_S = 0.05
CHUNK = 1 << 16


class BlackholeProxy:
    """Forwards 127.0.0.1:`port` (default: a free port) to `upstream` until `close()`."""

    def __init__(self, upstream: tuple[str, int], port: int = 0) -> None:
        self.upstream = upstream
        self._lock = threading.Lock()
        self._blackholed = False
        self._stop = threading.Event()
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(128)
        self.port: int = self._listener.getsockname()[1]
        self._socks: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self.connections = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def blackholed(self) -> bool:
        with self._lock:
            return self._blackholed

    def blackhole(self, on: bool) -> None:
        """Cut (True) or heal (False) the link, for every connection."""
        with self._lock:
            self._blackholed = on

    def start(self) -> BlackholeProxy:
        thread = threading.Thread(target=self._accept_loop, name="blackhole-proxy-accept", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            socks = list(self._socks)
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.close()
        for thread in self._threads:
            thread.join(5)

    def __enter__(self) -> BlackholeProxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _accept_loop(self) -> None:
        self._listener.settimeout(POLL_INTERVAL_S * 2)
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()  # nothing listens upstream: the peer sees its connection refused, closed
                continue
            try:
                for sock in (client, server):
                    sock.settimeout(None)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:  # the client reset it already: that connection only, never the accept loop
                client.close()
                server.close()
                continue
            with self._lock:
                self._socks.update((client, server))
                self.connections += 1
            thread = threading.Thread(target=self._pump, args=(client, server), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        peer = {client.fileno(): server, server.fileno(): client}
        by_fd = {client.fileno(): client, server.fileno(): server}
        poller = select.poll()
        for fd in by_fd:
            poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        try:
            while not self._stop.is_set():
                if self.blackholed:
                    self._stop.wait(POLL_INTERVAL_S)
                    continue
                ready = poller.poll(POLL_INTERVAL_S * 1000)
                if self.blackholed:
                    continue  # the cut began while this thread waited: nothing crosses
                for fd, _ in ready:
                    data = by_fd[fd].recv(CHUNK)
                    if not data:
                        return
                    peer[fd].sendall(data)
        except OSError:
            return
        finally:
            with self._lock:
                self._socks.difference_update((client, server))
            for sock in (client, server):
                with contextlib.suppress(OSError):
                    sock.close()
