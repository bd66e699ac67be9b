"""A Kafka-frame-aware TCP proxy on 127.0.0.1 between clients and a broker, injecting seeded faults.

Requests are parsed frame by frame (4-byte size, then api_key int16, api_version int16, correlation_id int32)
and responses matched to them by correlation id, so faults can be aimed at one Kafka API:

| action        | the request ...                                                                     |
|---------------|-------------------------------------------------------------------------------------|
| DELAY         | is forwarded `delay_ms` later; later requests of its connection queue behind it     |
| HOLD          | waits until `release_held()` (same ordering rule)                                    |
| DROP_REQUEST  | is never forwarded; the connection is closed (the broker never sees it)             |
| DROP_RESPONSE | is forwarded; its response is swallowed and the connection closed (indeterminate)   |
| DUPLICATE     | is forwarded, and replayed once more 0.2 s later on a fresh broker connection whose  |
|               | response is discarded (a replayed Produce must append nothing)                      |
| RESET         | is not forwarded; the client gets an RST                                            |

`blackhole(True)` stops moving bytes in both directions (connections stay open, as in a network partition)
until `blackhole(False)`. The proxy never forwards a partial or altered frame.
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


class Action(Enum):
    DELAY = "delay"
    HOLD = "hold"
    DROP_REQUEST = "drop-request"
    DROP_RESPONSE = "drop-response"
    DUPLICATE = "duplicate"
    RESET = "reset"


@dataclass(frozen=True, slots=True)
class Rule:
    action: Action
    api_keys: frozenset[int] = frozenset()  # empty: every request
    probability: float = 1.0
    delay_ms: int = 0
    limit: int | None = None  # fire at most this many times


class _Closed(Exception):
    """This connection is to be closed (a fault, or a peer went away)."""


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
        self.stats: collections.Counter[str] = collections.Counter()
        self._rules: dict[int, Rule] = {}
        self._fired: collections.Counter[int] = collections.Counter()
        self._handles = itertools.count(1)
        self._release = threading.Event()
        self._release_generation = 0
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

    def release_held(self) -> int:
        """Let every held request go (in order, per connection); how many were held."""
        with self.lock:
            held = self.stats["held-now"]
            self._release_generation += 1
        return held

    def held(self) -> int:
        with self.lock:
            return self.stats["held-now"]

    def blackhole(self, on: bool) -> None:
        with self.lock:
            self._blackhole = on
            self.stats["blackholes"] += int(on)

    def set_upstream(self, upstream: tuple[str, int]) -> None:
        with self.lock:
            self.upstream = upstream

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
        """Requests and responses frame by frame, with the rules' and the random faults."""
        responses = bytearray()
        requests = bytearray()
        #: requests not yet forwarded, in order: (not before this monotonic time, hold generation, frame)
        queue: collections.deque[tuple[float, int | None, bytes]] = collections.deque()
        swallow: set[int] = set()  # correlation ids whose responses are dropped
        frames = 0
        try:
            while not self._stop.is_set():
                with self.lock:
                    blackholed = self._blackhole
                    generation = self._release_generation
                if blackholed:
                    time.sleep(0.05)
                    continue
                self._forward_due(queue, server, generation)
                readable, _, _ = select.select([client, server], [], [], 0.02 if queue else 0.2)
                if client in readable:
                    data = client.recv(1 << 16)
                    if not data:
                        self._event(conn, "client closed")
                        if queue:  # bytes the client sent are still on their way: they arrive late
                            self._drain(queue, server, conn)
                            queue.clear()
                        return
                    if frames >= 1 and self._chance(self.reset):
                        self._rst(client, conn, f"reset while the client sent {len(data)} bytes")
                        return
                    requests += data
                    while len(requests) >= 12:
                        (size,) = struct.unpack_from(">i", requests)
                        if len(requests) < 4 + size:
                            break
                        frame = bytes(requests[: 4 + size])
                        del requests[: 4 + size]
                        self._request(frame, conn, queue, swallow, client, generation)
                    self._forward_due(queue, server, generation)
                if server in readable:
                    data = server.recv(1 << 16)
                    if not data:
                        self._event(conn, "broker closed")
                        return
                    responses += data
                    while len(responses) >= 8:
                        (size,) = struct.unpack_from(">i", responses)
                        if len(responses) < 4 + size:
                            break
                        frame = bytes(responses[: 4 + size])
                        del responses[: 4 + size]
                        frames += 1
                        (correlation_id,) = struct.unpack_from(">i", frame, 4)
                        if correlation_id in swallow or (
                            frames > self.after_frames and self._chance(self.drop_response)
                        ):
                            with self.lock:
                                self.dropped += 1
                            self._event(conn, f"dropped response corr {correlation_id} ({size} bytes)")
                            return
                        client.sendall(frame)
                        with self.lock:
                            self.forwarded += 1
                        self._event(conn, f"forwarded response corr {correlation_id} ({size} bytes)")
        except (OSError, _Closed) as e:
            self._event(conn, f"closed: {e!r}")
            return
        finally:
            with self.lock:
                self.stats["held-now"] -= sum(1 for _, gen, _ in queue if gen is not None)
            for s in (client, server):
                with contextlib.suppress(OSError):
                    s.close()
            with self.lock:
                self._socks.discard(client)
                self._socks.discard(server)

    def _request(
        self,
        frame: bytes,
        conn: int,
        queue: collections.deque[tuple[float, int | None, bytes]],
        swallow: set[int],
        client: socket.socket,
        generation: int,
    ) -> None:
        api_key, version, correlation_id = struct.unpack_from(">hhi", frame, 4)
        self._event(conn, f"request key {api_key} v{version} corr {correlation_id} ({len(frame) - 4} bytes)")
        rule = self._rule_for(api_key)
        now = time.monotonic()
        if rule is None:
            queue.append((now, None, frame))
            return
        action = rule.action
        if action is Action.DELAY:
            queue.append((now + rule.delay_ms / 1000, None, frame))
        elif action is Action.HOLD:
            with self.lock:
                self.stats["held-now"] += 1
            queue.append((math.inf, generation, frame))
        elif action is Action.DROP_REQUEST:
            raise _Closed(f"dropped request key {api_key} corr {correlation_id}")
        elif action is Action.DROP_RESPONSE:
            swallow.add(correlation_id)
            queue.append((now, None, frame))
        elif action is Action.DUPLICATE:
            queue.append((now, None, frame))
            threading.Thread(target=self._replay, args=(frame, conn), daemon=True).start()
        else:
            self._rst(client, conn, f"reset at request key {api_key} corr {correlation_id}")
            raise _Closed("reset")

    def _forward_due(
        self,
        queue: collections.deque[tuple[float, int | None, bytes]],
        server: socket.socket,
        generation: int,
    ) -> None:
        now = time.monotonic()
        while queue:
            due, held_in, frame = queue[0]
            if held_in is not None and generation > held_in:
                with self.lock:
                    self.stats["held-now"] -= 1
                    self.stats["released"] += 1
            elif due > now:
                return
            queue.popleft()
            server.sendall(frame)

    def _drain(
        self, queue: collections.deque[tuple[float, int | None, bytes]], server: socket.socket, conn: int
    ) -> None:
        """Deliver what a closed client had sent (once due or released; at most 60 s), then close."""
        deadline = time.monotonic() + 60
        while queue and not self._stop.is_set() and time.monotonic() < deadline:
            with self.lock:
                generation = self._release_generation
            self._forward_due(queue, server, generation)
            time.sleep(0.02)
        self._event(conn, "delivered the requests of a closed client late")
        with contextlib.suppress(OSError):
            server.settimeout(2)
            server.recv(1 << 16)

    def _replay(self, frame: bytes, conn: int) -> None:
        """The same request once more, on a fresh connection; its response is read and discarded."""
        time.sleep(0.2)
        try:
            with socket.create_connection(self.upstream, timeout=10) as s:
                s.sendall(frame)
                header = _recv_exact(s, 4)
                (size,) = struct.unpack(">i", header)
                _recv_exact(s, size)
            with self.lock:
                self.stats["replayed"] += 1
            self._event(conn, "replayed a request on a fresh connection")
        except OSError as e:
            self._event(conn, f"replay failed: {e!r}")

    def _rst(self, client: socket.socket, conn: int, why: str) -> None:
        with self.lock:
            self.resets += 1
        self._event(conn, why)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _recv_exact(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed before the whole response")
        out += chunk
    return bytes(out)
