"""The metrics listener: `/metrics` (Prometheus), `/healthz` and `/readyz` (Kubernetes probes) over HTTP.

Configured by `metrics.listener=http://<host>:<port>` (off when empty, the default). It runs on the
broker's event loop as one more asyncio server: a tiny HTTP/1.1 responder, because what it serves is
three fixed GET paths to a scraper and a kubelet, and a web framework (aiohttp is not a dependency)
would be most of the broker's dependency weight for that; prometheus_client's own servers
(`start_http_server`) run a thread per server with the WSGI stack and would read the broker's state
from that thread, racing the event loop.

Wire, per connection (one request, then the connection is closed: `Connection: close`):

    request:  <METHOD> <path>[?query] HTTP/1.x CRLF  (header lines CRLF)*  CRLF      at most 8 KiB, 10 s
    response: HTTP/1.1 <status> CRLF Content-Type, Content-Length, [Content-Encoding: gzip,]
              Connection: close CRLF CRLF <body>                                    (HEAD: no body)

    GET /metrics   200, prometheus_client's text format (its CONTENT_TYPE_LATEST), gzip when the
                   request's Accept-Encoding allows it
    GET /healthz   200 "ok": the process is serving HTTP on its event loop (liveness)
    GET /readyz    200 "ready", or 503 with one reason per line: starting up, partitions loading, a
                   coordinator loading, in a cluster not registered in ZooKeeper or not caught up
    GET /console/… the web console, with `console.enable=true` (exactly.broker.console); 401 with a
                   Basic challenge when security is on and the request has no valid credentials
    other paths    404; other methods 405; a malformed request 400

A scrape never holds the event loop for long: the broker's state is copied on the loop
(`BrokerCollector.snapshot`, about a microsecond per series) and the exposition text is built and
compressed in a worker thread (`render`), so requests and fsync completions go on meanwhile. One
scrape at a time: a second one waits for the first (a slow scraper cannot pile up threads).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from exactly.broker.metrics import BrokerCollector, Family, Readiness, render

if TYPE_CHECKING:
    from exactly.broker.console import Console

__all__ = ["MetricsServer"]

log = logging.getLogger(__name__)

_MAX_REQUEST = 8192
_READ_TIMEOUT_S = 10.0
_TEXT = "text/plain; charset=utf-8"
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}


class MetricsServer:
    """Serves /metrics, /healthz and /readyz on `host:port` (port 0: any free port, see `port`)."""

    def __init__(
        self, collector: BrokerCollector, ready: Callable[[], Readiness], console: Console | None = None
    ) -> None:
        self._collector = collector
        self._ready = ready
        self._console = console
        self._server: asyncio.Server | None = None
        self._scrape = asyncio.Lock()
        self._clients: set[asyncio.Task[None]] = set()
        self.scrapes = 0

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._serve, host, port, limit=_MAX_REQUEST)

    @property
    def port(self) -> int:
        assert self._server is not None
        bound: int = self._server.sockets[0].getsockname()[1]
        return bound

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._clients):
            task.cancel()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2):
                await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._clients.add(task)
        try:
            async with asyncio.timeout(_READ_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
            status, content_type, body, headers = await self._respond(head)
            lines = [
                f"HTTP/1.1 {status} {_REASONS[status]}",
                f"Content-Type: {content_type}",
                f"Content-Length: {len(body)}",
                *headers,
                "Connection: close",
                "",
                "",
            ]
            writer.write("\r\n".join(lines).encode("latin-1"))
            if not head.startswith(b"HEAD "):
                writer.write(body)
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass  # a client that sent nothing usable, or went away: nothing to answer
        except asyncio.CancelledError:
            pass  # the broker is stopping
        except Exception:
            log.exception("the metrics listener failed to answer a request")
        finally:
            if task is not None:
                self._clients.discard(task)
            writer.transport.abort()

    async def _respond(self, head: bytes) -> tuple[int, str, bytes, list[str]]:
        """(status, content type, body, more header lines) for one request head."""
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return 400, _TEXT, b"bad request\n", []
        method, target, _ = parts
        path = target.split("?", 1)[0]
        if self._console is not None and (path == "/console" or path.startswith("/console/")):
            headers = {}
            for line in lines[1:]:
                name, sep, value = line.partition(":")
                if sep:
                    headers[name.strip().lower()] = value.strip()
            return await self._console.respond(method, target, headers)
        if path not in ("/metrics", "/healthz", "/readyz"):
            return 404, _TEXT, b"not found: try /metrics, /healthz or /readyz\n", []
        if method not in ("GET", "HEAD"):
            return 405, _TEXT, b"method not allowed\n", ["Allow: GET, HEAD"]
        if path == "/healthz":
            return 200, _TEXT, b"ok\n", []
        if path == "/readyz":
            readiness = self._ready()
            if readiness.ready:
                return 200, _TEXT, b"ready\n", []
            return 503, _TEXT, "".join(f"{r}\n" for r in readiness.reasons).encode(), []
        gzipped = any(
            line.lower().startswith("accept-encoding:") and "gzip" in line.lower() for line in lines[1:]
        )
        async with self._scrape:
            families = self._collector.snapshot()  # on the loop: the state is the loop's
            body = await asyncio.get_running_loop().run_in_executor(None, _encode, families, gzipped)
            self.scrapes += 1
        return 200, CONTENT_TYPE_LATEST, body, ["Content-Encoding: gzip"] if gzipped else []


def _encode(families: list[Family], gzipped: bool) -> bytes:
    text = render(families)
    return gzip.compress(text, compresslevel=1) if gzipped else text
