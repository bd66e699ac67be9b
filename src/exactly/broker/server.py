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
import time
from collections.abc import Callable
from typing import Any

from exactly.broker.config import BrokerConfig
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import HANDLERS, advertised, advertised_max
from exactly.broker.flusher import Flusher
from exactly.broker.groups import GroupService
from exactly.broker.transactions import TransactionService
from exactly.clock import Clock, SystemClock
from exactly.cluster.metadata import ClusterMetadata, TopicInfo
from exactly.cluster.producer_ids import ProducerIdManager
from exactly.configs.topic import TOPIC_CONFIGS, validate_topic_overrides
from exactly.errors import ErrorCode, KafkaError, ProtocolError
from exactly.protocol import primitives as p
from exactly.protocol.api import RequestHeader, UnsupportedVersionError, decode_request, encode_response
from exactly.protocol.framing import FrameDecoder
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from exactly.quotas.entities import QuotaKey
from exactly.quotas.manager import ClientQuotaManager
from exactly.storage.config import LogConfig
from exactly.storage.log import PartitionLog
from exactly.storage.log_manager import LogManager

log = logging.getLogger(__name__)

_READ_SIZE = 1 << 18
_MAX_IN_FLIGHT = 64  # requests read ahead of their responses, per connection


class Broker:
    """Everything a handler can reach, and the listening socket."""

    def __init__(self, config: BrokerConfig, clock: Clock | None = None) -> None:
        self.static_config = config
        self.clock: Clock = clock or SystemClock()
        self.metadata = ClusterMetadata(config.data_dir)
        try:
            self.config = config.with_dynamic(self.dynamic_configs())
        except KafkaError as e:  # a stored run-time config this version no longer accepts
            log.warning("ignoring the run-time broker configs: %s", e.message)
            self.config = config
        self.logs = LogManager(
            config.data_dir,
            self.config.log,
            self.clock,
            {name: self._log_config(info.configs) for name, info in self.metadata.topics.items()},
        )
        self.flusher = Flusher()
        self.producer_ids = ProducerIdManager(self.metadata)
        self.groups = GroupService(self)
        self.transactions = TransactionService(self)
        window_ms = config.quota_window_size_seconds * 1000
        self.produce_quotas = ClientQuotaManager(
            QuotaKey.PRODUCER_BYTE_RATE,
            lambda: self.metadata.client_quotas,
            config.quota_window_num,
            window_ms,
        )
        self.fetch_quotas = ClientQuotaManager(
            QuotaKey.CONSUMER_BYTE_RATE,
            lambda: self.metadata.client_quotas,
            config.quota_window_num,
            window_ms,
        )
        self._data_waiter: asyncio.Future[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], Connection] = {}
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

    # --- partitions -------------------------------------------------------------------------------------

    def log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get_log(topic, partition)

    def _log_config(self, overrides: dict[str, str]) -> LogConfig:
        known = {name: value for name, value in overrides.items() if name in TOPIC_CONFIGS}
        if len(known) != len(overrides):  # stored by an older version (e.g. Kafka 3's removed configs)
            log.warning("ignoring unknown topic configs %s", sorted(set(overrides) - set(known)))
        return LogConfig.from_properties(known, base=self.config.log) if known else self.config.log

    def validate_topic_configs(self, configs: dict[str, str]) -> LogConfig:
        """The LogConfig these overrides give (KafkaError INVALID_CONFIG when they are not valid)."""
        return self._log_config(validate_topic_overrides(configs))

    # --- run-time broker configs -------------------------------------------------------------------------

    def dynamic_configs(self, resource: str | None = None) -> dict[str, str]:
        """The run-time configs of `resource` ("" = cluster default, or this broker's id), or both merged
        (the broker's own over the default) when `resource` is None."""
        stored = self.metadata.broker_configs
        if resource is not None:
            return dict(stored.get(resource, {}))
        return {**stored.get("", {}), **stored.get(str(self.static_config.node_id), {})}

    def alter_broker_configs(self, resource: str, configs: dict[str, str], *, validate_only: bool) -> None:
        """Replace the run-time configs of `resource`; they apply at once to every topic without its own
        override, and are persisted (KafkaError INVALID_CONFIG when a value is not valid)."""
        layers = dict(self.metadata.broker_configs)
        layers[resource] = configs
        merged = {**layers.get("", {}), **layers.get(str(self.static_config.node_id), {})}
        config = self.static_config.with_dynamic(merged)
        topic_configs = {
            name: LogConfig.from_properties(
                {k: v for k, v in info.configs.items() if k in TOPIC_CONFIGS}, base=config.log
            )
            for name, info in self.metadata.topics.items()
        }
        if validate_only:
            return
        self.metadata.set_broker_configs(resource, configs)
        self.config = config
        self.logs.default_config = config.log
        for name, log_config in topic_configs.items():
            self.logs.set_topic_config(name, log_config)

    async def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicInfo:
        log_config = self.validate_topic_configs(configs)
        info = self.metadata.create_topic(name, partitions, validate_topic_overrides(configs))
        for partition in range(partitions):
            self.logs.get_or_create_log(name, partition, log_config)
        return info

    async def ensure_internal_topic(self, name: str, partitions: int, segment_bytes: int) -> None:
        """Create a coordinator's compacted internal topic on first use."""
        if name in self.metadata.topics:
            return
        configs = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes)}
        try:
            await self.create_topic(name, partitions, configs)
        except KafkaError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
            return
        log.info("created %s with %d partitions", name, partitions)

    def load_internal_topic(self, name: str, load: Callable[[PartitionLog], int]) -> tuple[int, float]:
        """Run a coordinator's `load` on every partition of its internal topic: (records, seconds)."""
        info = self.metadata.topics.get(name)
        if info is None:
            return 0, 0.0
        start = time.perf_counter()
        count = 0
        for partition in range(info.partitions):
            plog = self.log(name, partition)
            if plog is not None:
                count += load(plog)
        return count, time.perf_counter() - start

    def has_partition(self, topic: str, partition: int) -> bool:
        info = self.metadata.topics.get(topic)
        return info is not None and 0 <= partition < info.partitions

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.metadata.delete_topic(name)
        for partition in range(info.partitions):
            self.logs.delete_log(name, partition)
        return info

    def add_partitions(self, name: str, total: int) -> TopicInfo:
        info = self.metadata.add_partitions(name, total)
        config = self._log_config(info.configs)
        for partition in range(total):
            self.logs.get_or_create_log(name, partition, config)
        return info

    def alter_topic_configs(self, name: str, configs: dict[str, str]) -> TopicInfo:
        config = self.validate_topic_configs(configs)
        info = self.metadata.set_configs(name, validate_topic_overrides(configs))
        self.logs.set_topic_config(name, config)
        return info

    def _sync_logs_with_metadata(self) -> None:
        """After a crash between a metadata append and the log change, finish the change."""
        for name, info in self.metadata.topics.items():
            for partition in range(info.partitions):
                self.logs.get_or_create_log(name, partition, self._log_config(info.configs))
        for (topic, partition), _ in self.logs.logs():
            existing = self.metadata.topics.get(topic)
            if existing is None or partition >= existing.partitions:
                log.warning("deleting %s-%d: its topic no longer exists", topic, partition)
                self.logs.delete_log(topic, partition)

    # --- fetch long-poll ---------------------------------------------------------------------------------

    def data_waiter(self) -> asyncio.Future[None]:
        """A future that completes at the next append (take it before reading, then wait on it)."""
        if self._data_waiter is None or self._data_waiter.done():
            self._data_waiter = asyncio.get_running_loop().create_future()
        return self._data_waiter

    def data_appended(self) -> None:
        waiter, self._data_waiter = self._data_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait_for_data(self, waiter: asyncio.Future[None], seconds: float) -> None:
        await asyncio.wait([waiter], timeout=seconds)

    # --- periodic work -----------------------------------------------------------------------------------

    async def _every(
        self, interval_ms: int | Callable[[], int], work: Callable[[], object], *, in_thread: bool = False
    ) -> None:
        """Run `work` every `interval_ms` (a callable: read again each time, for a run-time config);
        `in_thread` for work that only flushes or writes checkpoints (thread-safe in storage), so an fsync
        never stalls the event loop."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep((interval_ms() if callable(interval_ms) else interval_ms) / 1000)
            try:
                if in_thread:
                    await loop.run_in_executor(None, work)
                else:
                    work()
            except Exception:
                log.exception("periodic task %s failed", getattr(work, "__name__", work))

    # --- lifecycle ---------------------------------------------------------------------------------------

    async def start(self) -> None:
        self.logs.startup()
        self._sync_logs_with_metadata()
        config = self.config
        self._tasks = [
            asyncio.create_task(self._every(1000, self.logs.flush_dirty_logs, in_thread=True)),
            asyncio.create_task(
                self._every(config.checkpoint_interval_ms, self.logs.checkpoint, in_thread=True)
            ),
            asyncio.create_task(self._every(lambda: self.config.cleaner_backoff_ms, self.logs.clean_logs)),
            asyncio.create_task(
                self._every(config.retention_check_interval_ms, self.logs.delete_old_segments)
            ),
            asyncio.create_task(
                self._every(
                    config.producer_id_expiration_check_interval_ms, self.logs.remove_expired_producers
                )
            ),
        ]
        self._tasks += self.groups.start()  # loads __consumer_offsets before the broker listens
        self._tasks += self.transactions.start()  # loads __transaction_state, resumes marker writing
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
        # Close sockets and abandon in-flight requests (a parked long-poll fetch included) instead of
        # cancelling the connection tasks: asyncio's stream callback logs a cancelled task as an error.
        for connection in list(self._connections.values()):
            connection.close()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=10)
        if self._server is not None:
            await self._server.wait_closed()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.transactions.stop()
        await self.groups.stop()
        self.flusher.close()
        self.logs.close()
        self.metadata.close()
        log.info("exactly broker %d stopped", self.config.node_id)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        connection = Connection(self, reader, writer, next(self._ids))
        self._connections[task] = connection
        try:
            await connection.run()
        finally:
            del self._connections[task]


class Connection:
    def __init__(
        self, broker: Broker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, connection_id: int
    ) -> None:
        self.broker = broker
        self.reader = reader
        self.writer = writer
        self.id = connection_id
        self._in_flight: set[asyncio.Future[list[p.Chunk] | None]] = set()
        self._muted_until = 0.0  # loop time before which nothing more is read (quota throttling)
        self._closing = asyncio.Event()  # ends a mute early when the broker shuts the connection
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
                # A throttled client's requests wait (also those that arrived while it was being muted).
                muted = self._muted_until - asyncio.get_running_loop().time()
                if muted > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._closing.wait(), muted)
                    if self._closing.is_set():
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
            for future in list(self._in_flight):  # the peer is gone: nobody waits for these answers
                future.cancel()
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
            return _done(
                _unsupported_api_versions(e.header, self.broker.config.transaction_two_phase_commit_enable)
            )
        key = ApiKey(header.api_key)
        handler = HANDLERS.get(key)
        if handler is None:
            raise ProtocolError(f"no handler for {key.name} v{header.api_version}")
        if header.api_version > advertised_max(key):
            raise ProtocolError(f"{key.name} v{header.api_version} is not supported")
        context = RequestContext(self.broker, header, self.id, self.peer, len(frame), self.mute)
        future = asyncio.ensure_future(self._run(handler, context, body))
        self._in_flight.add(future)
        future.add_done_callback(self._in_flight.discard)
        return future

    def mute(self, ms: int) -> None:
        """Read nothing more from this client for `ms` (Kafka mutes a throttled client's channel)."""
        until = asyncio.get_running_loop().time() + ms / 1000
        self._muted_until = max(self._muted_until, until)

    def close(self) -> None:
        """Shut down: drop in-flight requests and close the socket (the read loop then sees EOF)."""
        self._closing.set()
        for future in list(self._in_flight):
            future.cancel()
        self.writer.close()

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


def api_versions_body(
    error: ErrorCode = ErrorCode.NONE, two_phase_commit: bool = True
) -> ApiVersionsResponse:
    keys = [ApiVersion(int(key), lo, hi) for key, (lo, hi) in advertised(two_phase_commit).items()]
    return ApiVersionsResponse(error_code=error, api_keys=keys)


def _unsupported_api_versions(header: RequestHeader, two_phase_commit: bool) -> list[p.Chunk]:
    """Kafka answers an ApiVersions version it doesn't know with a v0 body: error 35 and its ranges."""
    v0 = header._replace(api_version=0)
    return encode_response(v0, api_versions_body(ErrorCode.UNSUPPORTED_VERSION, two_phase_commit))
