"""The broker process: the services a handler reaches, periodic work, listening, start and stop.

One `Connection` (`exactly.broker.connection`) per client socket. Requests on a connection are started
in arrival order and their responses are written in the same order, while later requests may already be
running (pipelining: a Produce waiting for its fsync does not stop the next one from appending). Produce
with acks=0 gets no response, as in Kafka.

Bad input closes only the connection it came on: an unparseable frame, a frame over
`socket.request.max.bytes`, an API we do not serve (except ApiVersions, which answers
UNSUPPORTED_VERSION with its v0 body so the client can retry with a version we know).

Stop (SIGTERM): stop listening, close every connection (their in-flight requests, parked ones included,
are cancelled and their sockets aborted), then the periodic tasks, the coordinators, the flusher and the
logs. It takes about as long as the last fsync in progress, whatever the clients are doing.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from exactly.broker.config import BrokerConfig, ConfigError
from exactly.broker.connection import READ_SIZE, Connection
from exactly.broker.connection_slots import ConnectionSlots, descriptor_share
from exactly.broker.flusher import Flusher
from exactly.broker.groups import GroupService
from exactly.broker.listener_server import ListenerServer
from exactly.broker.transactions import TransactionService
from exactly.clock import Clock, SystemClock
from exactly.cluster.metadata import ClusterMetadata, TopicInfo
from exactly.cluster.producer_ids import ProducerIdManager
from exactly.configs.topic import TOPIC_CONFIGS, validate_topic_overrides
from exactly.errors import ErrorCode, KafkaError
from exactly.fetch.session import FetchSessionCache
from exactly.quotas.entities import QuotaKey
from exactly.quotas.manager import ClientQuotaManager
from exactly.security.authorizer import Authorizer
from exactly.security.listeners import Listener
from exactly.security.principal import ANONYMOUS, KafkaPrincipal
from exactly.security.sasl import OAUTHBEARER, SaslSession, sasl_mechanisms
from exactly.security.tls import TlsConfigError, TlsListener, tls_listeners
from exactly.storage import files
from exactly.storage.config import LogConfig
from exactly.storage.file_handles import HANDLES, open_files_budget
from exactly.storage.log import PartitionLog
from exactly.storage.log_manager import LogManager

log = logging.getLogger(__name__)

_CLOSE_WAIT_S = 2.0  # stop(): the most connections get to end (each needs a loop turn, at most 1 s)
_BACKGROUND_LOAD_SLICE = 50  # partitions loaded per event-loop turn after start-up (~50 ms of loading)


class Broker:
    """Everything a handler can reach, and the listening socket."""

    def __init__(self, config: BrokerConfig, clock: Clock | None = None) -> None:
        try:
            self.sasl_mechanisms = sasl_mechanisms(config.listeners, config.properties)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        try:
            self.tls: dict[str, TlsListener] = tls_listeners(config.listeners, config.properties)
        except TlsConfigError as e:
            raise ConfigError(str(e)) from None
        self.static_config = config
        self.clock: Clock = clock or SystemClock()
        if config.debug_fsync_ledger:
            files.open_fsync_ledger(Path(config.debug_fsync_ledger), config.data_dir)
        self.metadata = ClusterMetadata(config.data_dir)
        try:
            self.config = config.with_dynamic(self.dynamic_configs())
        except KafkaError as e:  # a stored run-time config this version no longer accepts
            log.warning("ignoring the run-time broker configs: %s", e.message)
            self.config = config
        self.acls = Authorizer(
            config.super_users, config.allow_everyone_if_no_acl_found, self.metadata.acls
        )  # every ACL, indexed; it decides only when an authorizer is configured
        self.authorizer: Authorizer | None = self.acls if config.authorizer_class_name else None
        if config.debug_principal_by_client_id:
            log.warning(
                "exactly.debug.principal.by.client.id=true: every request's principal is User:<client id>, "
                "WITHOUT AUTHENTICATION; for tests only, never in production"
            )
        HANDLES.budget = open_files_budget(config.log_max_open_files)
        self.connection_descriptors = descriptor_share(HANDLES.budget)
        self.connection_slots = ConnectionSlots(
            lambda: min(self.config.max_connections, self.connection_descriptors)
        )
        self.logs = LogManager(
            config.data_dir,
            self.config.log,
            self.clock,
            {name: self._log_config(info.configs) for name, info in self.metadata.topics.items()},
        )
        self.flusher = Flusher(self.logs.data_dir)
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
        self.fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots)
        self._data_waiter: asyncio.Future[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._servers: dict[str, ListenerServer] = {}  # listener name -> its server
        self._connections: dict[asyncio.Task[None], Connection] = {}
        self._ids = itertools.count(1)
        self._stopped = asyncio.Event()
        self._stopping = False

    @property
    def port(self) -> int:
        """The port of the first listener (bound: a configured port 0 is resolved)."""
        return self.bound_port(self.config.listeners[0])

    def bound_port(self, listener: Listener) -> int:
        port: int = self._servers[listener.name].sockets[0].getsockname()[1]
        return port

    def sasl_session(self, listener: Listener | None) -> SaslSession | None:
        """A new connection's SASL state on a SASL listener (None elsewhere)."""
        if listener is None or not listener.protocol.sasl:
            return None
        sasl = self.sasl_mechanisms[listener.name]
        credentials = self.metadata.scram_credentials
        return SaslSession(
            sasl.mechanisms,
            sasl.plain_users,
            lambda user, mechanism: credentials.get((user, mechanism)),
            self.config.connections_max_reauth_ms,  # KIP-368 (0: no re-authentication)
            sasl.oauthbearer,
            self.clock.milliseconds,
        )

    def advertised_for(self, listener: Listener | None) -> tuple[str, int]:
        """Where clients of `listener` (None: the first) are told to connect, as Kafka answers Metadata
        with the endpoint of the listener the request came in on."""
        listener = listener or self.config.listeners[0]
        return listener.advertised_host, listener.advertised_port or self.bound_port(listener)

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
        """All or nothing: the logs first, then the metadata record that makes the topic exist. A failure
        in between removes the logs made; a crash in between leaves logs without a topic, which start-up
        removes (`_sync_logs_with_metadata`). Never a topic in metadata without its logs."""
        log_config = self.validate_topic_configs(configs)
        overrides = validate_topic_overrides(configs)
        self.metadata.check_new_topic(name, partitions)
        return self._logs_then_record(
            name,
            range(partitions),
            log_config,
            lambda: self.metadata.create_topic(name, partitions, overrides),
            f"cannot record topic {name!r}",
        )

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
        """All or nothing, in the order `create_topic` uses: the new partitions' logs, then the record."""
        current = self.metadata.check_add_partitions(name, total)
        return self._logs_then_record(
            name,
            range(current.partitions, total),
            self._log_config(current.configs),
            lambda: self.metadata.add_partitions(name, total),
            f"cannot record the new partitions of {name!r}",
        )

    def _logs_then_record(
        self, name: str, partitions: range, config: LogConfig, record: Callable[[], TopicInfo], what: str
    ) -> TopicInfo:
        """Create the logs of `partitions`, then append the metadata record that makes them exist; if the
        record fails the logs are removed again (a refused append is cut off: KAFKA_STORAGE_ERROR)."""
        self._create_logs(name, partitions, config)
        try:
            return record()
        except BaseException as e:
            self._remove_logs(name, partitions)
            if isinstance(e, OSError):
                raise _metadata_storage_error(e, what) from None
            raise

    def _create_logs(self, name: str, partitions: range, config: LogConfig) -> None:
        """Create the logs of `partitions` (none of which exists), or none of them: KAFKA_STORAGE_ERROR
        when the disk or the file-descriptor budget refuses one."""
        made: list[int] = []
        try:
            with files.synced_together(self.logs.data_dir):  # one syncfs, not an fsync per file and directory
                for partition in partitions:
                    if self.config.debug_create_crash_after_partitions == len(made) and made:
                        log.error("exactly.debug.create.crash.after.partitions: exiting in a create")
                        os._exit(17)
                    self.logs.get_or_create_log(name, partition, config)
                    made.append(partition)
        except OSError as e:
            failed = partitions[min(len(made), len(partitions) - 1)]
            self._remove_logs(name, made)
            self.logs.remove_partition_dir(name, failed)
            log.warning(
                "could not create partition %s-%d (%s); removed the %d partitions made, nothing was created",
                name,
                failed,
                e,
                len(made),
            )
            why = e.strerror or str(e)
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"cannot create partition {failed} of {name!r}: {why}"
            ) from None
        except BaseException:  # a bug (UNKNOWN_SERVER_ERROR for the request): leaves no logs either
            self._remove_logs(name, made)
            if len(made) < len(partitions):
                self.logs.remove_partition_dir(name, partitions[len(made)])
            raise

    def _remove_logs(self, name: str, partitions: range | list[int]) -> None:
        for partition in partitions:
            self.logs.delete_log(name, partition)

    def alter_topic_configs(self, name: str, configs: dict[str, str]) -> TopicInfo:
        config = self.validate_topic_configs(configs)
        info = self.metadata.set_configs(name, validate_topic_overrides(configs))
        self.logs.set_topic_config(name, config)
        return info

    def _sync_logs_with_metadata(self) -> None:
        """Make the logs match the metadata after a crash: logs made for a create (or new partitions) whose
        record never landed are removed, and a partition the metadata has but whose log is gone (deleted by
        hand, or an older version's create order) is made again; one line per topic says what was done."""
        stray: dict[str, list[int]] = {}
        present = set(self.logs.partitions())
        for topic, partition in present:
            existing = self.metadata.topics.get(topic)
            if existing is None or partition >= existing.partitions:
                stray.setdefault(topic, []).append(partition)
        for topic, partitions in sorted(stray.items()):
            partitions.sort()
            for partition in partitions:
                self.logs.delete_log(topic, partition)
            existing = self.metadata.topics.get(topic)
            log.warning(
                "removed %d %s of %s (%s): %s",
                len(partitions),
                "log" if len(partitions) == 1 else "logs",
                topic,
                _partition_list(partitions),
                "the topic does not exist (a create interrupted by a crash, or a delete)"
                if existing is None
                else f"the topic has {existing.partitions} partitions (an interrupted CreatePartitions)",
            )
        for name, info in self.metadata.topics.items():
            missing = [p for p in range(info.partitions) if (name, p) not in present]
            for partition in missing:
                self.logs.get_or_create_log(name, partition, self._log_config(info.configs))
            if missing:
                log.warning(
                    "created the %d missing %s of %s (%s): the topic exists",
                    len(missing),
                    "log" if len(missing) == 1 else "logs",
                    name,
                    _partition_list(missing),
                )

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
            except OSError as e:  # a full disk: logged once by storage, retried next time
                files.storage_error(e, getattr(work, "__name__", "periodic work"))
            except KafkaError as e:
                if e.code != ErrorCode.KAFKA_STORAGE_ERROR:
                    log.exception("periodic task %s failed", getattr(work, "__name__", work))
            except Exception:
                log.exception("periodic task %s failed", getattr(work, "__name__", work))

    async def _load_logs_in_background(self) -> None:
        """Load the partitions no request has asked for yet, a slice per loop turn (the broker serves
        between slices; a request for one of them loads it at once)."""
        started, total = time.monotonic(), self.logs.pending
        while self.logs.pending:
            try:
                self.logs.load_pending(_BACKGROUND_LOAD_SLICE)
            except Exception:
                log.exception("loading logs in the background failed; the rest load when first asked for")
                return
            await asyncio.sleep(0)
        log.info("loaded %d logs in the background in %.1f s", total, time.monotonic() - started)

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
        if self.logs.pending:
            self._tasks.append(asyncio.create_task(self._load_logs_in_background()))
        self._tasks += self.groups.start()  # loads __consumer_offsets before the broker listens
        self._tasks += self.transactions.start()  # loads __transaction_state, resumes marker writing
        for listener in self.config.listeners:
            try:
                self._servers[listener.name] = await self._listen(listener)
            except OSError as e:  # the port is taken, the address is not this machine's: one line
                raise ConfigError(
                    f"listener {listener.name} cannot listen on {listener.host}:{listener.port}: "
                    f"{os.strerror(e.errno) if e.errno else e}"
                ) from None
            log.info(
                "exactly broker %d listening on %s://%s:%d (%s)",
                self.config.node_id,
                listener.name,
                listener.host,
                self.bound_port(listener),
                listener.protocol.value,
            )
            self._warn_if_unauthenticated(listener)

    async def _listen(self, listener: Listener) -> ListenerServer:
        """A listener's server accepts within the connection slots; a TLS listener's also does the
        handshake and names the client (exactly.broker.listener_server)."""

        async def accept(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, principal: KafkaPrincipal
        ) -> None:
            await self._accept(listener, reader, writer, principal)

        return await ListenerServer.start(
            listener.name,
            listener.host,
            listener.port,
            self.tls.get(listener.name),
            self.connection_slots,
            accept,
            READ_SIZE,
        )

    def _warn_if_unauthenticated(self, listener: Listener) -> None:
        """Kafka's view: PLAINTEXT authenticates nobody; SSL authenticates clients only with
        ssl.client.auth=required (with `requested` or `none` a client without a certificate is ANONYMOUS);
        SASL listeners authenticate every client, but OAUTHBEARER's unsecured tokens prove nothing."""
        sasl = self.sasl_mechanisms.get(listener.name)
        if sasl is not None and OAUTHBEARER in sasl.mechanisms:
            log.warning(
                "listener %s enables OAUTHBEARER with unsecured JWS tokens (Kafka's default validator): any "
                "client can name any principal; for development only",
                listener.name,
            )
        if listener.loopback_only or listener.protocol.sasl:
            return
        tls = self.tls.get(listener.name)
        if tls is not None and tls.authenticates_clients:
            return
        how = (
            "without authentication"
            if tls is None
            else f"without client authentication (ssl.client.auth={tls.settings.client_auth.value})"
        )
        log.warning(
            "listener %s accepts connections from other machines %s: anyone who can reach port %d can "
            "read, write, fence and abort (use SASL_SSL, or SSL with ssl.client.auth=required)",
            listener.name,
            how,
            self.bound_port(listener),
        )

    async def serve_until_stopped(self) -> None:
        await self._stopped.wait()

    def request_stop(self) -> None:
        self._stopped.set()

    async def stop(self) -> None:
        self._stopping = True
        for server in self._servers.values():
            server.close()
        # Not by cancelling the connection tasks: asyncio's stream callback logs a cancelled task as an
        # error. Each `Connection.run` cancels its own requests and returns.
        for connection in list(self._connections.values()):
            connection.close()
        if self._connections:
            _, late = await asyncio.wait(list(self._connections), timeout=_CLOSE_WAIT_S)
            if late:
                log.warning("%d connections did not close within %.0f s", len(late), _CLOSE_WAIT_S)
        for name, server in self._servers.items():
            try:
                async with asyncio.timeout(_CLOSE_WAIT_S):
                    await server.wait_closed()
            except TimeoutError:
                log.warning("listener %s did not close within %.0f s", name, _CLOSE_WAIT_S)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.transactions.stop()
        await self.groups.stop()
        self.flusher.close()
        self.logs.close()
        self.metadata.close()
        log.info("exactly broker %d stopped", self.config.node_id)

    async def _accept(
        self,
        listener: Listener,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        principal: KafkaPrincipal = ANONYMOUS,
    ) -> None:
        """The stream callback of one client socket: serve it, then log one line saying why it ended."""
        if self._stopping:
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        connection = Connection(self, reader, writer, next(self._ids), listener)
        connection.principal = principal  # TLS: the client certificate's (exactly.broker.listener_server)
        if principal != ANONYMOUS:
            log.info(
                "connection %d from %s on listener %s authenticated as %s",
                connection.id,
                connection.peer,
                listener.name,
                principal,
            )
        self._connections[task] = connection
        try:
            ending = await connection.run()
        finally:
            del self._connections[task]
        if log.isEnabledFor(ending.reason.level):
            log.log(
                ending.reason.level,
                "closing connection %d from %s (%s); %d open",
                connection.id,
                connection.peer,
                ending,
                len(self._connections),
            )


def _metadata_storage_error(e: OSError, what: str) -> KafkaError:
    """A metadata append that the disk refused (cut off again, so nothing changed) is the topic's
    KAFKA_STORAGE_ERROR, as Kafka answers when its log directory fails."""
    log.warning("%s (%s); removed its new logs, nothing was created", what, e)
    return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{what}: {e.strerror or e}")


def _partition_list(partitions: list[int]) -> str:
    """[0, 1, 2, 5] -> 'partitions 0-2, 5' (sorted input)."""
    runs: list[str] = []
    start = prev = partitions[0]
    for p in [*partitions[1:], None]:
        if p is not None and p == prev + 1:
            prev = p
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if p is not None:
            start = prev = p
    return ("partition " if len(partitions) == 1 else "partitions ") + ", ".join(runs)
