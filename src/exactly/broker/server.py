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
from collections.abc import Collection
from pathlib import Path

from exactly.broker.broker_configs import BrokerConfigs
from exactly.broker.cluster_member import ClusterMember, cluster_config
from exactly.broker.config import BrokerConfig, ConfigError
from exactly.broker.connection import READ_SIZE, Connection
from exactly.broker.connection_slots import UNLIMITED, ConnectionSlots, IpLimits, descriptor_share
from exactly.broker.console import Console
from exactly.broker.flusher import Flusher
from exactly.broker.frame_stream import FrameStream
from exactly.broker.groups import GroupService
from exactly.broker.handling import Handling
from exactly.broker.listener_server import ListenerServer
from exactly.broker.metrics import BrokerCollector, LoopLag, Readiness, readiness
from exactly.broker.metrics_http import MetricsServer
from exactly.broker.replica_manager import ReplicaManager
from exactly.broker.scheduler import Scheduler
from exactly.broker.share_coordinator import ShareCoordinatorService
from exactly.broker.share_persister import SharePersister
from exactly.broker.shares import ShareService
from exactly.broker.topic_manager import TopicManager, topic_log_config
from exactly.broker.transactions import TRANSACTION_TOPIC, TransactionService
from exactly.broker.txn_verifier import TransactionVerifier
from exactly.clock import Clock, SystemClock
from exactly.cluster.metadata import ClusterMetadata
from exactly.cluster.producer_ids import ProducerIdManager
from exactly.cluster.znodes import RegisteredEndpoint
from exactly.fetch.session import FetchSessionCache
from exactly.group.share.records import SHARE_STATE_TOPIC
from exactly.metrics import BrokerStats
from exactly.quotas.entities import QuotaKey
from exactly.quotas.manager import ClientQuotaManager, ControllerMutationQuotaManager, RequestQuotaManager
from exactly.security.acls import AclBinding
from exactly.security.authorizer import Authorizer
from exactly.security.listeners import Listener
from exactly.security.principal import ANONYMOUS, KafkaPrincipal
from exactly.security.sasl import OAUTHBEARER, SaslSession, sasl_mechanisms
from exactly.security.tls import TlsConfigError, TlsListener, tls_listeners
from exactly.storage import files
from exactly.storage.drop_behind import DROP_BEHIND
from exactly.storage.file_handles import HANDLES, open_files_budget
from exactly.storage.log_manager import LogManager

log = logging.getLogger(__name__)

_CLOSE_WAIT_S = 2.0  # stop(): the most connections get to end (each needs a loop turn, at most 1 s)
_BACKGROUND_LOAD_SLICE = 50  # partitions loaded per event-loop turn after start-up (~50 ms of loading)


class Broker:
    """The assembly: builds the services handlers use, starts and stops them, and listens."""

    def __init__(self, config: BrokerConfig, clock: Clock | None = None) -> None:
        try:
            self.sasl_mechanisms = sasl_mechanisms(config.listeners, config.properties)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        try:
            self.tls: dict[str, TlsListener] = tls_listeners(config.listeners, config.properties)
        except TlsConfigError as e:
            raise ConfigError(str(e)) from None
        self.clock: Clock = clock or SystemClock()
        self.handling = Handling()  # requests whose handler is running (parked ones included)
        if config.debug_fsync_ledger:
            files.open_fsync_ledger(Path(config.debug_fsync_ledger), config.data_dir)
        self.metadata = ClusterMetadata(config.data_dir)
        self.configs = BrokerConfigs(config, self.metadata)
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
        DROP_BEHIND.window = config.log_drop_behind_bytes
        self.connection_descriptors = descriptor_share(HANDLES.budget)
        self._ip_limits = IpLimits()
        self.connection_slots = ConnectionSlots(
            lambda: min(self.config.max_connections, self.connection_descriptors),
            listener_capacity=lambda name: self.config.listener_max_connections.get(name, UNLIMITED),
            per_ip=lambda address: self._ip_limits.limit(self.config, address),
        )
        logs = LogManager(
            config.all_log_dirs,
            self.config.log,
            self.clock,
            {
                name: topic_log_config(info.configs, self.config.log)
                for name, info in self.metadata.topics.items()
            },
            keep_high_watermarks=bool(config.zookeeper_connect),
            broker_id=config.node_id,
        )
        self.configs.apply_to(logs)
        clustered = bool(config.zookeeper_connect)
        self.replicas = ReplicaManager(
            logs,
            Flusher(logs.log_dirs),
            local_id=config.node_id,
            cluster=clustered,
            now_ms=self.clock.monotonic_ms,
        )
        self.replicas.flusher.inline_when = self.handling.alone  # a lone request's fsync: no thread hand-over
        self.replicas.flusher.answered = self.handling.answered
        self.topics = TopicManager(self.metadata, self.replicas, self.configs)
        self.scheduler = Scheduler()
        self.cluster: ClusterMember | None = None
        if clustered:
            self.cluster = ClusterMember(
                cluster_config(config),
                self.replicas,
                self.metadata,
                self._registered_endpoints,
                self._topic_config_changed,
            )
            self.topics.cluster = self.cluster
            self.cluster.security.acls_changed = self._acls_changed
            self.cluster.dynamic_configs.broker_configs_changed = self.configs.reload
            self.next_producer_id = self.cluster.next_producer_id
        else:
            self.next_producer_id = ProducerIdManager(self.metadata).next_id
        self.groups = GroupService(self.config, self.replicas, self.topics, self.clock, self.scheduler)
        self.share_coordinator = ShareCoordinatorService(self.config, self.replicas, self.topics, self.clock)
        self.share_persister = SharePersister(config.node_id, self.share_coordinator)
        self.shares = ShareService(
            self.config,
            self.replicas,
            self.topics,
            self.clock,
            self.scheduler,
            self.share_coordinator,
            self.share_persister,
        )
        self.transactions = TransactionService(
            self.config,
            self.replicas,
            self.topics,
            self.clock,
            self.scheduler,
            self.next_producer_id,
        )
        if self.cluster is not None:  # markers go to each partition's leader over the inter-broker listener
            cache, cluster_config_ = self.cluster.cache, self.cluster.config
            self.transactions.markers.route(
                cache.leader_of,
                lambda broker_id: cache.endpoint(broker_id, cluster_config_.inter_broker_listener),
                cluster_config_.inter_broker_security,
            )
            share_coordinator = self.share_coordinator
            self.share_persister.route(  # share state goes to the leader of its __share_group_state partition
                lambda key: cache.leader_of(SHARE_STATE_TOPIC, share_coordinator.partition_for(key)),
                lambda broker_id: cache.endpoint(broker_id, cluster_config_.inter_broker_listener),
                cluster_config_.inter_broker_security,
            )
            transactions = self.transactions
            self.transactions.verifier = TransactionVerifier(
                config.node_id,
                lambda txn_id: cache.leader_of(TRANSACTION_TOPIC, transactions.partition_for(txn_id)),
                lambda broker_id: cache.endpoint(broker_id, cluster_config_.inter_broker_listener),
                cluster_config_.inter_broker_security,
            )
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
        self.request_quotas = RequestQuotaManager(
            lambda: self.metadata.client_quotas, config.quota_window_num, window_ms
        )
        self.mutation_quotas = ControllerMutationQuotaManager(
            lambda: self.metadata.client_quotas, config.quota_window_num, window_ms
        )
        self.fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots)
        self._servers: dict[str, ListenerServer] = {}  # listener name -> its server
        self._connections: dict[asyncio.Task[None], Connection] = {}
        self._ids = itertools.count(1)
        self._stopped = asyncio.Event()
        # requests are served once start-up is done (a cluster's broker: once its view of ZooKeeper is
        # loaded; Kafka's `enableRequestProcessing`); connections accepted before wait for it
        self._serving = asyncio.Event()
        self._stopping = False
        # metrics.listener: the hot-path counters exist only when something will read them
        self.stats: BrokerStats | None = BrokerStats() if config.metrics_listener else None
        self.metrics_server: MetricsServer | None = None

    @property
    def serving(self) -> bool:
        """Start-up is done and requests are served (until stop)."""
        return self._serving.is_set() and not self._stopping

    @property
    def stopping(self) -> bool:
        return self._stopping

    def readiness(self) -> Readiness:
        """What /readyz answers (exactly.broker.metrics.readiness)."""
        return readiness(self)

    @property
    def config(self) -> BrokerConfig:
        """The configs in force: static, with the run-time ones over them."""
        return self.configs.current

    @property
    def port(self) -> int:
        """The port of the first listener (bound: a configured port 0 is resolved)."""
        return self.bound_port(self.config.listeners[0])

    def bound_port(self, listener: Listener) -> int:
        return self._servers[listener.name].port

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

    def _registered_endpoints(self) -> tuple[RegisteredEndpoint, ...]:
        """What this broker registers in ZooKeeper: each listener's advertised endpoint (bound port)."""
        return tuple(
            RegisteredEndpoint(listener.name, *self.advertised_for(listener), listener.protocol.value)
            for listener in self.config.listeners
        )

    def _acls_changed(self, added: Collection[AclBinding], removed: Collection[AclBinding]) -> None:
        """The cluster's ACLs changed in ZooKeeper: the authorizer's index follows."""
        for acl in removed:
            self.acls.remove(acl)
        for acl in added:
            self.acls.add(acl)

    def _topic_config_changed(self, topic: str) -> None:
        """A topic's configs changed in ZooKeeper: its logs take the new config."""
        info = self.metadata.topics.get(topic)
        if info is not None:
            self.replicas.logs.set_topic_config(topic, self.topics.log_config(dict(info.configs)))

    async def _load_logs_in_background(self) -> None:
        """Load the partitions no request has asked for yet, a slice per loop turn (the broker serves
        between slices; a request for one of them loads it at once)."""
        logs = self.replicas.logs
        started, total = time.monotonic(), logs.pending
        while logs.pending:
            try:
                logs.load_pending(_BACKGROUND_LOAD_SLICE)
            except Exception:
                log.exception("loading logs in the background failed; the rest load when first asked for")
                return
            await asyncio.sleep(0)
        log.info("loaded %d logs in the background in %.1f s", total, time.monotonic() - started)

    async def _move_replicas(self) -> None:
        """Copy the replicas being moved between log dirs (AlterReplicaLogDirs) a step per loop turn, so
        produce and fetch go on; a caught-up copy takes over its partition (ReplicaManager.move_replicas)."""
        replicas = self.replicas
        while True:
            await replicas.moves_wanted.wait()
            try:
                more = replicas.move_replicas()
            except Exception:
                log.exception("moving replicas between log dirs failed; the moves are retried")
                more = True
                await asyncio.sleep(1)
            if not more:
                replicas.moves_wanted.clear()
            await asyncio.sleep(0)  # requests are served between steps

    # --- lifecycle ---------------------------------------------------------------------------------------

    async def start(self) -> None:
        logs = self.replicas.logs
        logs.startup()
        await self._start_metrics()
        if self.cluster is None:
            self.topics.sync_logs_with_metadata()
        else:
            self.metadata.forget_local_topics()  # a cluster's topics are ZooKeeper's
        config = self.config
        every = self.scheduler.every
        every(1000, logs.flush_dirty_logs, in_thread=True)
        every(config.checkpoint_interval_ms, logs.checkpoint, in_thread=True)
        every(lambda: self.config.cleaner_backoff_ms, logs.clean_logs)
        every(config.retention_check_interval_ms, logs.delete_old_segments)
        every(config.producer_id_expiration_check_interval_ms, logs.remove_expired_producers)
        if logs.pending:
            self.scheduler.spawn(self._load_logs_in_background())
        if logs.moves.future_logs():  # moves a restart interrupted go on
            self.replicas.moves_wanted.set()
        self.scheduler.spawn(self._move_replicas())
        self.groups.start()  # loads __consumer_offsets before the broker listens
        self.shares.start()  # loads __share_group_state (group.share.enable=true)
        self.transactions.start()  # loads __transaction_state, resumes marker writing
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
        if self.cluster is not None:
            await self.cluster.start()
            lag = config.replica_lag_time_max_ms
            every(max(1, lag // 2), lambda: self.replicas.shrink_isrs(lag))
        self._serving.set()

    async def _start_metrics(self) -> None:
        """The metrics listener (metrics.listener), first: /healthz and /readyz answer during start-up."""
        endpoint = self.config.metrics_listener
        if endpoint is None:
            return
        lag = LoopLag()
        self.scheduler.spawn(lag.run())
        console = Console(self) if self.config.console_enable else None
        server = MetricsServer(BrokerCollector(self, lag), self.readiness, console)
        host, port = endpoint
        try:
            await server.start(host, port)
        except OSError as e:
            raise ConfigError(
                f"metrics.listener cannot listen on {host}:{port}: {os.strerror(e.errno) if e.errno else e}"
            ) from None
        self.metrics_server = server
        log.info("metrics, /healthz and /readyz on http://%s:%d", host, server.port)
        if console is not None:
            log.info(
                "the web console on http://%s:%d/console/ (security: %s)", host, server.port, console.security
            )

    async def _listen(self, listener: Listener) -> ListenerServer:
        """A listener's server accepts within the connection slots; a TLS listener's also does the
        handshake and names the client (exactly.broker.listener_server)."""

        async def accept(
            reader: asyncio.StreamReader | FrameStream,
            writer: asyncio.StreamWriter,
            principal: KafkaPrincipal,
        ) -> None:
            assert isinstance(reader, FrameStream)
            await self._accept(listener, reader, writer, principal)

        return await ListenerServer.start(
            listener.name,
            listener.host,
            listener.port,
            self.tls.get(listener.name),
            self.connection_slots,
            accept,
            READ_SIZE,
            self.config.socket_request_max_bytes,
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
        self._serving.set()  # connections still waiting for start-up see `_stopping` and go
        if self.cluster is not None:
            await self.cluster.stop()  # a controlled shutdown first: leadership moves while we still serve
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
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        await self.scheduler.stop()
        await self.transactions.stop()
        await self.groups.stop()
        await self.shares.stop()
        self.replicas.flusher.close()
        self.replicas.logs.close()
        self.metadata.close()
        log.info("exactly broker %d stopped", self.config.node_id)

    async def _accept(
        self,
        listener: Listener,
        reader: FrameStream,
        writer: asyncio.StreamWriter,
        principal: KafkaPrincipal = ANONYMOUS,
    ) -> None:
        """The stream callback of one client socket: serve it, then log one line saying why it ended."""
        if not self._serving.is_set():
            await self._serving.wait()
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
        stats = None if self.stats is None else self.stats.listener(listener.name)
        if stats is not None:
            stats.created += 1
        try:
            ending = await connection.run()
        finally:
            del self._connections[task]
            if stats is not None:
                stats.closed += 1
        if log.isEnabledFor(ending.reason.level):
            log.log(
                ending.reason.level,
                "closing connection %d from %s (%s); %d open",
                connection.id,
                connection.peer,
                ending,
                len(self._connections),
            )
