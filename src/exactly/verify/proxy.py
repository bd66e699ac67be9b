"""A Kafka-frame-aware TCP proxy on 127.0.0.1 between clients and a broker, injecting seeded faults.

Wire format handled (every Kafka request/response, any version): a request frame is
`size int32 | api_key int16 | api_version int16 | correlation_id int32 | rest of header and body`,
a response frame is `size int32 | correlation_id int32 | rest`; `size` counts the bytes after itself.
Requests are cut into whole frames and responses matched to them by correlation id per connection, so
faults can be aimed at one Kafka API:

| action        | the request ...                                                                     |
|---------------|-------------------------------------------------------------------------------------|
| DELAY         | is forwarded `delay_ms` later; later requests of its connection queue behind it     |
| HOLD          | waits until `release_held()` (same ordering rule)                                    |
| DROP_REQUEST  | is never forwarded; the connection is closed (the broker never sees it)             |
| DROP_RESPONSE | is forwarded; its response is swallowed and the connection closed (indeterminate)   |
| DUPLICATE     | is forwarded, and replayed once more 0.2 s later on a fresh broker connection (after |
|               | the connection's own ApiVersions request, if any) whose response is discarded        |
| RESET         | is not forwarded; the client gets an RST                                            |
| BLACKHOLE     | and everything after it on its connection vanish both ways; the connection stays open|

`blackhole(True)` stops moving bytes in both directions on every connection (connections stay open, as in
a network partition) until `blackhole(False)`. The proxy never forwards a partial or altered frame. A client
that closes its connection while requests of it are delayed or held does not take them back: they reach the
broker late, as they would from a real network.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import math
import random
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass
from enum import Enum

API_VERSIONS = 18


class Action(Enum):
    DELAY = "delay"
    HOLD = "hold"
    DROP_REQUEST = "drop-request"
    DROP_RESPONSE = "drop-response"
    DUPLICATE = "duplicate"
    RESET = "reset"
    BLACKHOLE = "blackhole"


@dataclass(frozen=True, slots=True)
class Rule:
    action: Action
    api_keys: frozenset[int] = frozenset()  # empty: every request
    probability: float = 1.0
    delay_ms: int = 0  # DELAY
    limit: int | None = None  # fire at most this many times


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int


@dataclass(frozen=True, slots=True)
class Seen:
    """A response the proxy kept for the caller (`keep_responses`): its request's key and version, the
    frame after the size, and whether it answered a replay (DUPLICATE) rather than the client."""

    api_key: int
    api_version: int
    frame: bytes
    replay: bool


def request_header(frame: bytes) -> RequestHeader:
    """The fixed start of a request frame (with its 4-byte size)."""
    api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame, 4)
    return RequestHeader(api_key, api_version, correlation_id)


def response_correlation_id(frame: bytes) -> int:
    (correlation_id,) = struct.unpack_from(">i", frame, 4)
    return int(correlation_id)


def cut_frames(buffer: bytearray) -> list[bytes]:
    """Remove and return the whole frames (size included) at the start of `buffer`."""
    frames = []
    while len(buffer) >= 4:
        (size,) = struct.unpack_from(">i", buffer)
        if size < 0:
            raise _Closed(f"a frame of {size} bytes")
        if len(buffer) < 4 + size:
            break
        frames.append(bytes(buffer[: 4 + size]))
        del buffer[: 4 + size]
    return frames


class _Closed(Exception):
    """This connection is to be closed (a fault, or a peer went away)."""


@dataclass(frozen=True, slots=True)
class _Pending:
    """A request of one connection not yet forwarded: due at a monotonic time, or held (hold id)."""

    due: float
    hold: int | None
    frame: bytes


class FaultProxy:
    """A TCP proxy on 127.0.0.1 between clients and a broker that injects seeded faults.

    Rules (`add_rule`) act on chosen requests, first matching rule wins. Besides them, two random faults
    from the constructor: for every response frame read from the broker, with probability `drop_response`
    the frame is swallowed and both sides of that connection are closed (the request was processed, the
    client never hears about it); for every chunk of request bytes from the client, with probability
    `reset` the chunk is not forwarded and the connection is reset (RST to the client via SO_LINGER 0,
    close to the broker), so the broker never sees (the rest of) that request. `after_frames` exempts the
    first response frames of each connection (the ApiVersions/Metadata handshake) from drops, and resets
    start after the first response, so that clients get going.
    """

    def __init__(
        self,
        upstream: tuple[str, int],
        seed: int,
        drop_response: float = 0.0,
        reset: float = 0.0,
        after_frames: int = 2,
        port: int = 0,
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
        #: counters by action and api key ("hold key 26"), responses by api key, "replayed", "released"
        self.stats: collections.Counter[str] = collections.Counter()
        #: responses kept for the caller, see keep_responses()
        self.seen: collections.deque[Seen] = collections.deque(maxlen=1000)
        self._keep: frozenset[int] = frozenset()
        #: request frames (after the size) kept for the caller, see keep_requests()
        self.requests_seen: collections.deque[bytes] = collections.deque(maxlen=10_000)
        self._keep_requests: frozenset[int] = frozenset()
        self._rules: dict[int, Rule] = {}
        self._fired: collections.Counter[int] = collections.Counter()
        self._handles = itertools.count(1)
        self._holds = itertools.count(1)
        self._held: dict[int, int] = {}  # hold id -> api key, while held
        self._released: set[int] = set()  # hold ids let go, until their connection forwards them
        self._blackhole = False
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(128)
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._socks: set[socket.socket] = set()
        #: the last events (monotonic time, connection number, what), for failure messages
        self.events: collections.deque[tuple[float, int, str]] = collections.deque(maxlen=60)

    # --- rules --------------------------------------------------------------------------------------

    def add_rule(self, rule: Rule) -> int:
        with self.lock:
            handle = next(self._handles)
            self._rules[handle] = rule
            return handle

    def remove_rule(self, handle: int) -> None:
        with self.lock:
            self._rules.pop(handle, None)

    def clear_rules(self) -> None:
        with self.lock:
            self._rules.clear()

    def release_held(self, api_key: int | None = None) -> int:
        """Let the held requests (of one api key, or all) go, in order per connection; how many."""
        with self.lock:
            ids = [h for h, key in self._held.items() if api_key is None or key == api_key]
            for h in ids:
                del self._held[h]
            self._released.update(ids)
            self.stats["released"] += len(ids)
        return len(ids)

    def held(self) -> int:
        with self.lock:
            return len(self._held)

    def blackhole(self, on: bool) -> None:
        with self.lock:
            self._blackhole = on
            self.stats["blackholes"] += int(on)

    def set_upstream(self, upstream: tuple[str, int]) -> None:
        with self.lock:
            self.upstream = upstream

    def keep_responses(self, api_keys: frozenset[int]) -> None:
        """From now on keep the responses to these api keys in `seen` (the client's and replays')."""
        with self.lock:
            self._keep = api_keys

    def keep_requests(self, api_keys: frozenset[int]) -> None:
        """From now on keep the client's requests of these api keys in `requests_seen`, as they arrive."""
        with self.lock:
            self._keep_requests = api_keys

    def _rule_for(self, api_key: int) -> Rule | None:
        with self.lock:
            if not self.enabled:
                return None
            for handle, rule in self._rules.items():
                if rule.api_keys and api_key not in rule.api_keys:
                    continue
                if rule.limit is not None and self._fired[handle] >= rule.limit:
                    continue
                if rule.probability < 1.0 and self.rng.random() >= rule.probability:
                    continue
                self._fired[handle] += 1
                self.stats[f"{rule.action.value} key {api_key}"] += 1
                return rule
            return None

    # --- life -----------------------------------------------------------------------------------------

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
                with self.lock:
                    upstream = self.upstream
                server = socket.create_connection(upstream, timeout=5)
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
            f"{self.dropped} dropped, {self.resets} resets, held {self.held()}, stats {dict(self.stats)}"
        ]
        lines += [f"  {t - now:+.3f}s conn {c}: {what}" for t, c, what in list(self.events)]
        return "\n".join(lines)

    # --- one connection -------------------------------------------------------------------------------

    def _pump(self, client: socket.socket, server: socket.socket, conn: int = 0) -> None:
        """Requests and responses frame by frame, with the rules' and the random faults."""
        c = _Connection(self, client, server, conn)
        try:
            c.run()
        except (OSError, _Closed) as e:
            self._event(conn, f"closed: {e!r}")
        finally:
            with self.lock:
                for p in c.queue:
                    if p.hold is not None:
                        self._held.pop(p.hold, None)
                        self._released.discard(p.hold)
            for s in (client, server):
                with contextlib.suppress(OSError):
                    s.close()
            with self.lock:
                self._socks.discard(client)
                self._socks.discard(server)

    def _replay(self, frame: bytes, handshake: bytes | None, conn: int) -> None:
        """The same request once more on a fresh connection (after the client's ApiVersions request, so
        that it is a valid conversation); the responses are read and discarded (or kept, see `seen`)."""
        time.sleep(0.2)
        header = request_header(frame)
        try:
            with self.lock:
                upstream = self.upstream
            with socket.create_connection(upstream, timeout=10) as s:
                if handshake is not None:
                    s.sendall(handshake)
                    _recv_frame(s)
                s.sendall(frame)
                response = _recv_frame(s)
            with self.lock:
                self.stats["replayed"] += 1
                if header.api_key in self._keep:
                    self.seen.append(Seen(header.api_key, header.api_version, response[4:], replay=True))
            self._event(conn, f"replayed request key {header.api_key} on a fresh connection")
        except OSError as e:
            self._event(conn, f"replay failed: {e!r}")

    def _rst(self, client: socket.socket, conn: int, why: str) -> None:
        with self.lock:
            self.resets += 1
        self._event(conn, why)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


class _Connection:
    """The state of one proxied connection; runs in its own thread."""

    def __init__(self, proxy: FaultProxy, client: socket.socket, server: socket.socket, conn: int) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self.conn = conn
        self.requests = bytearray()
        self.responses = bytearray()
        self.queue: collections.deque[_Pending] = collections.deque()
        self.in_flight: dict[int, RequestHeader] = {}  # forwarded, by correlation id
        self.swallow: set[int] = set()  # correlation ids whose responses are dropped
        self.handshake: bytes | None = None  # the client's first ApiVersions request
        self.black = False  # a BLACKHOLE rule fired on this connection
        self.frames = 0  # responses read

    def run(self) -> None:
        proxy = self.proxy
        while not proxy._stop.is_set():
            with proxy.lock:
                blackholed = proxy._blackhole
            if blackholed:
                time.sleep(0.05)
                continue
            self.forward_due()
            readable = _readable([self.client, self.server], 0.02 if self.queue else 0.2)
            with proxy.lock:
                if proxy._blackhole:  # it began while this thread waited: nothing moves
                    continue
            if self.client in readable:
                data = self.client.recv(1 << 16)
                if not data:
                    proxy._event(self.conn, "client closed")
                    if self.queue:  # bytes the client sent are still on their way: they arrive late
                        self.drain()
                    return
                if self.black:
                    continue
                if self.frames >= 1 and proxy._chance(proxy.reset):
                    proxy._rst(self.client, self.conn, f"reset while the client sent {len(data)} bytes")
                    return
                self.requests += data
                for frame in cut_frames(self.requests):
                    if self.black:
                        break
                    self.request(frame)
                self.forward_due()
            if self.server in readable:
                data = self.server.recv(1 << 16)
                if not data:
                    proxy._event(self.conn, "broker closed")
                    return
                if self.black:
                    continue
                self.responses += data
                for frame in cut_frames(self.responses):
                    self.response(frame)

    def request(self, frame: bytes) -> None:
        proxy = self.proxy
        if len(frame) < 12:  # no header to read: forwarded as it is, in order (the broker judges it)
            self.queue.append(_Pending(time.monotonic(), None, frame))
            return
        header = request_header(frame)
        key, corr = header.api_key, header.correlation_id
        proxy._event(
            self.conn, f"request key {key} v{header.api_version} corr {corr} ({len(frame) - 4} bytes)"
        )
        if key == API_VERSIONS and self.handshake is None:
            self.handshake = frame
        if key in proxy._keep_requests:
            with proxy.lock:
                proxy.requests_seen.append(frame[4:])
        rule = proxy._rule_for(key)
        now = time.monotonic()
        action = None if rule is None else rule.action
        if rule is None or action is Action.DUPLICATE or action is Action.DROP_RESPONSE:
            self.queue.append(_Pending(now, None, frame))
            if action is Action.DROP_RESPONSE:
                self.swallow.add(corr)
            elif action is Action.DUPLICATE:
                threading.Thread(
                    target=proxy._replay, args=(frame, self.handshake, self.conn), daemon=True
                ).start()
        elif action is Action.DELAY:
            self.queue.append(_Pending(now + rule.delay_ms / 1000, None, frame))
        elif action is Action.HOLD:
            with proxy.lock:
                hold = next(proxy._holds)
                proxy._held[hold] = key
            self.queue.append(_Pending(math.inf, hold, frame))
        elif action is Action.DROP_REQUEST:
            raise _Closed(f"dropped request key {key} corr {corr}")
        elif action is Action.BLACKHOLE:
            proxy._event(self.conn, f"blackholed from request key {key} corr {corr} on")
            self.black = True
            self.queue.clear()
            self.requests.clear()
            self.responses.clear()
        else:
            proxy._rst(self.client, self.conn, f"reset at request key {key} corr {corr}")
            raise _Closed("reset")

    def response(self, frame: bytes) -> None:
        proxy = self.proxy
        self.frames += 1
        corr = response_correlation_id(frame) if len(frame) >= 8 else -1
        header = self.in_flight.pop(corr, None)
        key = -1 if header is None else header.api_key
        with proxy.lock:
            proxy.stats[f"response key {key}"] += 1
            if header is not None and key in proxy._keep:
                proxy.seen.append(Seen(key, header.api_version, frame[4:], replay=False))
        if corr in self.swallow or (self.frames > proxy.after_frames and proxy._chance(proxy.drop_response)):
            with proxy.lock:
                proxy.dropped += 1
            proxy._event(self.conn, f"dropped response corr {corr} key {key} ({len(frame) - 4} bytes)")
            raise _Closed("dropped a response")
        self.client.sendall(frame)
        with proxy.lock:
            proxy.forwarded += 1
        proxy._event(self.conn, f"forwarded response corr {corr} key {key} ({len(frame) - 4} bytes)")

    def forward_due(self) -> None:
        """Forward the queue's head while it is due (or released); it keeps later requests behind it."""
        proxy = self.proxy
        now = time.monotonic()
        while self.queue:
            head = self.queue[0]
            if head.hold is not None:
                with proxy.lock:
                    if head.hold not in proxy._released:
                        return
                    proxy._released.discard(head.hold)
            elif head.due > now:
                return
            self.queue.popleft()
            if len(head.frame) >= 12:
                header = request_header(head.frame)
                self.in_flight[header.correlation_id] = header
            self.server.sendall(head.frame)

    def drain(self) -> None:
        """Deliver what a closed client had sent (once due or released; at most 60 s), read the answers."""
        proxy = self.proxy
        deadline = time.monotonic() + 60
        while self.queue and not proxy._stop.is_set() and time.monotonic() < deadline:
            with proxy.lock:
                blackholed = proxy._blackhole
            if not blackholed:
                self.forward_due()
            time.sleep(0.02)
        proxy._event(self.conn, "delivered the requests of a closed client late")
        self.server.settimeout(2)
        with contextlib.suppress(OSError, _Closed):
            while self.in_flight:
                data = self.server.recv(1 << 16)
                if not data:
                    return
                self.responses += data
                for frame in cut_frames(self.responses):
                    header = (
                        self.in_flight.pop(response_correlation_id(frame), None) if len(frame) >= 8 else None
                    )
                    if header is not None:
                        with proxy.lock:
                            proxy.stats[f"late response key {header.api_key}"] += 1
                            if header.api_key in proxy._keep:
                                proxy.seen.append(Seen(header.api_key, header.api_version, frame[4:], False))


def _recv_frame(s: socket.socket) -> bytes:
    """One whole frame (with its size)."""
    head = _recv_exact(s, 4)
    (size,) = struct.unpack(">i", head)
    return head + _recv_exact(s, size)


def _recv_exact(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed before the whole response")
        out += chunk
    return bytes(out)


def _readable(socks: list[socket.socket], timeout_s: float) -> list[socket.socket]:
    """The sockets with data (or EOF) within `timeout_s`: poll(2), which has no FD_SETSIZE limit (a test
    process holding 1,024 descriptors made select() raise)."""
    poller = select.poll()
    by_fd = {sock.fileno(): sock for sock in socks}
    for fd in by_fd:
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    return [by_fd[fd] for fd, _ in poller.poll(timeout_s * 1000)]
