"""Broker configuration: Kafka's `server.properties` names and defaults.

`BrokerConfig.load(path, overrides)` reads a Kafka-style properties file (`key=value` or `key: value`,
`#`/`!` comments) and `--set key=value` overrides. Unknown names are logged and ignored, as Kafka does;
a known name with a bad value raises `ConfigError` with one readable line.

The broker-wide `log.*` settings become the default topic config (`LogConfig`), as in Kafka: each topic
config's broker synonyms (`exactly.configs.topic`) in priority order, `log.retention.ms` before
`log.retention.minutes` before `log.retention.hours` (x 3,600,000). Broker configs Kafka changes at run
time (`exactly.configs.broker`, `dynamic`) are layered on with `with_dynamic`.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from exactly.configs.broker import BROKER_CONFIGS, listener_config_base
from exactly.configs.topic import TOPIC_CONFIGS, broker_default
from exactly.errors import ErrorCode, ExactlyError, KafkaError
from exactly.group.config import MigrationPolicy
from exactly.protocol.messages import ApiKey
from exactly.quotas.connections import check_per_ip, parse_ip_overrides
from exactly.replication.replica_selector import REPLICA_SELECTOR_CLASSES
from exactly.security.authorizer import AUTHORIZER_CLASS_NAMES, parse_super_users
from exactly.security.listeners import (
    DEFAULT_PROTOCOL_MAP,
    Endpoint,
    Listener,
    SecurityProtocol,
    parse_endpoints,
    parse_protocol_map,
    resolve_listeners,
)
from exactly.storage.config import LogConfig

log = logging.getLogger(__name__)


class ConfigError(ExactlyError):
    """An invalid broker configuration value."""


DEFAULT_ENDPOINTS = (Endpoint(SecurityProtocol.PLAINTEXT.value, "127.0.0.1", 9092),)
DEFAULT_LISTENERS = resolve_listeners(DEFAULT_ENDPOINTS, None, DEFAULT_PROTOCOL_MAP, None)


def _int(lo: int = -(2**63), hi: int = 2**63 - 1) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError(f"expected an integer, got {raw!r}") from None
        if not lo <= value <= hi:
            raise ValueError(f"{value} is outside {lo}..{hi}")
        return value

    return parse


def _assignors(raw: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    unknown = [n for n in names if n not in ("uniform", "range")]
    if not names or unknown:
        raise ValueError(f"the built-in assignors are uniform and range, not {unknown or 'none'}")
    return names


def _migration_policy(raw: str) -> MigrationPolicy:
    return MigrationPolicy(raw.strip().lower())


def _share_reset(raw: str) -> str:
    value = raw.strip().lower()
    if value not in ("latest", "earliest"):
        raise ValueError("share.auto.offset.reset must be latest or earliest")
    return value


def _share_isolation(raw: str) -> str:
    value = raw.strip().lower()
    if value not in ("read_uncommitted", "read_committed"):
        raise ValueError("share.isolation.level must be read_uncommitted or read_committed")
    return value


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"expected true or false, got {raw!r}")
    return value == "true"


def _str(raw: str) -> str:
    return raw.strip()


PAUSE_STEPS = ("", "prepare-written", "first-marker-written", "markers-written", "decision-written")


def _pause_step(raw: str) -> str:
    step = raw.strip()
    if step not in PAUSE_STEPS:
        raise ValueError(f"must be one of {', '.join(s for s in PAUSE_STEPS if s)}")
    return step


def _api_keys(raw: str) -> frozenset[int]:
    """`CreateTopics,Metadata` -> their API keys."""
    by_name = {key.name.replace("_", "").lower(): int(key) for key in ApiKey}
    keys = set()
    for name in filter(None, (part.strip() for part in raw.split(","))):
        key = by_name.get(name.replace("_", "").lower())
        if key is None:
            raise ValueError(f"unknown API {name!r}")
        keys.add(key)
    return frozenset(keys)


def metrics_listener(raw: str) -> tuple[str, int] | None:
    """metrics.listener: `http://<host>:<port>` (an IPv6 host in brackets), or empty: no metrics listener."""
    value = raw.strip()
    if not value:
        return None
    match = re.fullmatch(r"http://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]*):(\d{1,5})/?", value)
    if match is None:
        raise ValueError(f"expected http://<host>:<port> (or empty), got {value!r}")
    host, port = match.group(1).strip("[]"), int(match.group(2))
    if port > 65535:
        raise ValueError(f"port {port} is outside 0..65535")
    return host or "0.0.0.0", port


def _replica_selector_class(raw: str) -> str | None:
    name = raw.strip()
    if name and name not in REPLICA_SELECTOR_CLASSES:
        known = ", ".join(sorted(REPLICA_SELECTOR_CLASSES))
        raise ValueError(f"unknown replica selector {name!r} (known: {known})")
    return name or None


def _log_dirs(raw: str) -> tuple[Path, ...]:
    """log.dirs: comma-separated paths, at least one, none twice."""
    dirs = tuple(Path(part.strip()) for part in raw.split(",") if part.strip())
    if not dirs:
        raise ValueError("no directory")
    if len({str(d) for d in dirs}) != len(dirs):
        raise ValueError("a directory is listed twice")
    return dirs


def _authorizer_class(raw: str) -> str:
    name = raw.strip()
    if name and name not in AUTHORIZER_CLASS_NAMES:
        raise ValueError(f"unknown authorizer {name!r} (known: {', '.join(sorted(AUTHORIZER_CLASS_NAMES))})")
    return name


# Kafka broker name -> (BrokerConfig field, parser)
_BROKER_KEYS: dict[str, tuple[str, Callable[[str], object]]] = {
    "node.id": ("node_id", _int(0, 2**31 - 1)),
    "broker.id": ("node_id", _int(0, 2**31 - 1)),
    "listeners": ("listener_endpoints", parse_endpoints),
    "advertised.listeners": ("advertised_endpoints", parse_endpoints),
    "listener.security.protocol.map": ("listener_protocol_map", parse_protocol_map),
    "inter.broker.listener.name": ("inter_broker_listener_name", lambda raw: raw.strip().upper() or None),
    "log.dirs": ("log_dirs", lambda raw: _log_dirs(raw)),
    "log.dir": ("data_dir", lambda raw: Path(raw.strip())),
    "num.partitions": ("num_partitions", _int(1, 1_000_000)),
    "default.replication.factor": ("default_replication_factor", _int(1, 32767)),
    # the replicated cluster (exactly.broker.cluster_member)
    "zookeeper.connect": ("zookeeper_connect", _str),
    "zookeeper.session.timeout.ms": ("zookeeper_session_timeout_ms", _int(1, 2**31 - 1)),
    "broker.rack": ("broker_rack", lambda raw: raw.strip() or None),
    "replica.selector.class": ("replica_selector_class", _replica_selector_class),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", _int(1)),
    "replica.fetch.wait.max.ms": ("replica_fetch_wait_max_ms", _int(0, 2**31 - 1)),
    "replica.fetch.min.bytes": ("replica_fetch_min_bytes", _int(1, 2**31 - 1)),
    "replica.fetch.max.bytes": ("replica_fetch_max_bytes", _int(0, 2**31 - 1)),
    "replica.fetch.response.max.bytes": ("replica_fetch_response_max_bytes", _int(0, 2**31 - 1)),
    "replica.fetch.backoff.ms": ("replica_fetch_backoff_ms", _int(0, 2**31 - 1)),
    "replica.socket.timeout.ms": ("replica_socket_timeout_ms", _int(1, 2**31 - 1)),
    "offsets.topic.replication.factor": ("offsets_topic_replication_factor", _int(1, 32767)),
    "transaction.state.log.replication.factor": ("transaction_state_log_replication_factor", _int(1, 32767)),
    "transaction.state.log.min.isr": ("transaction_state_log_min_isr", _int(1, 2**31 - 1)),
    "controlled.shutdown.enable": ("controlled_shutdown_enable", _bool),
    "controlled.shutdown.max.retries": ("controlled_shutdown_max_retries", _int(0, 2**31 - 1)),
    "controlled.shutdown.retry.backoff.ms": ("controlled_shutdown_retry_backoff_ms", _int(0)),
    "auto.leader.rebalance.enable": ("auto_leader_rebalance_enable", _bool),
    "leader.imbalance.check.interval.seconds": ("leader_imbalance_check_interval_seconds", _int(1)),
    "leader.imbalance.per.broker.percentage": ("leader_imbalance_per_broker_percentage", _int(0, 100)),
    "auto.create.topics.enable": ("auto_create_topics", _bool),
    "delete.topic.enable": ("delete_topic_enable", _bool),
    "socket.request.max.bytes": ("socket_request_max_bytes", _int(1, 2**31 - 1)),
    "connections.max.idle.ms": ("connections_max_idle_ms", _int(-1)),
    "connection.failed.authentication.delay.ms": ("failed_authentication_delay_ms", _int(0, 2**31 - 1)),
    "connections.max.reauth.ms": ("connections_max_reauth_ms", _int(0)),
    "message.max.bytes": ("message_max_bytes", _int(0, 2**31 - 1)),
    "max.request.partition.size.limit": ("max_request_partition_size_limit", _int(1, 2**31 - 1)),
    "quota.window.num": ("quota_window_num", _int(1, 1000)),
    "quota.window.size.seconds": ("quota_window_size_seconds", _int(1, 3600)),
    "log.retention.check.interval.ms": ("retention_check_interval_ms", _int(1)),
    "producer.id.expiration.check.interval.ms": ("producer_id_expiration_check_interval_ms", _int(1)),
    "cluster.id": ("cluster_id", _str),
    "log.flush.offset.checkpoint.interval.ms": ("checkpoint_interval_ms", _int(1)),
    "log.cleaner.backoff.ms": ("cleaner_backoff_ms", _int(1)),
    "max.incremental.fetch.session.cache.slots": (
        "max_incremental_fetch_session_cache_slots",
        _int(0, 2**31 - 1),
    ),
    # group coordinator (__consumer_offsets)
    "offsets.topic.num.partitions": ("offsets_topic_num_partitions", _int(1, 100_000)),
    "offsets.topic.segment.bytes": ("offsets_topic_segment_bytes", _int(14, 2**31 - 1)),
    "offsets.retention.minutes": ("offsets_retention_ms", lambda raw: _int(1, 2**40)(raw) * 60_000),
    "offsets.retention.check.interval.ms": ("offsets_retention_check_interval_ms", _int(1)),
    "group.min.session.timeout.ms": ("group_min_session_timeout_ms", _int(0, 2**31 - 1)),
    "group.max.session.timeout.ms": ("group_max_session_timeout_ms", _int(0, 2**31 - 1)),
    "group.initial.rebalance.delay.ms": ("group_initial_rebalance_delay_ms", _int(0, 2**31 - 1)),
    # KIP-848 consumer groups (group/consumer/); catalogued in configs/broker_accepted.py
    "group.consumer.session.timeout.ms": ("group_consumer_session_timeout_ms", _int(1, 2**31 - 1)),
    "group.consumer.min.session.timeout.ms": ("group_consumer_min_session_timeout_ms", _int(1, 2**31 - 1)),
    "group.consumer.max.session.timeout.ms": ("group_consumer_max_session_timeout_ms", _int(1, 2**31 - 1)),
    "group.consumer.heartbeat.interval.ms": ("group_consumer_heartbeat_interval_ms", _int(1, 2**31 - 1)),
    "group.consumer.min.heartbeat.interval.ms": (
        "group_consumer_min_heartbeat_interval_ms",
        _int(1, 2**31 - 1),
    ),
    "group.consumer.max.heartbeat.interval.ms": (
        "group_consumer_max_heartbeat_interval_ms",
        _int(1, 2**31 - 1),
    ),
    "group.consumer.max.size": ("group_consumer_max_size", _int(1, 2**31 - 1)),
    "group.consumer.assignors": ("group_consumer_assignors", _assignors),
    "group.consumer.migration.policy": ("group_consumer_migration_policy", _migration_policy),
    # KIP-932 share groups (group/share/, broker/shares.py)
    "group.share.enable": ("group_share_enable", _bool),
    "group.share.session.timeout.ms": ("group_share_session_timeout_ms", _int(1, 2**31 - 1)),
    "group.share.heartbeat.interval.ms": ("group_share_heartbeat_interval_ms", _int(1, 2**31 - 1)),
    "group.share.max.size": ("group_share_max_size", _int(1, 1000)),
    "group.share.record.lock.duration.ms": ("group_share_record_lock_duration_ms", _int(1000, 3_600_000)),
    "group.share.delivery.count.limit": ("group_share_delivery_count_limit", _int(2, 10)),
    "group.share.partition.max.record.locks": ("group_share_partition_max_record_locks", _int(100, 10_000)),
    "share.auto.offset.reset": ("share_auto_offset_reset", _share_reset),
    "share.isolation.level": ("share_isolation_level", _share_isolation),
    # exactly's transactional share acks extension (docs/share-transactional-acks.md)
    "share.transactional.ack.enable": ("share_transactional_ack_enable", _bool),
    "share.coordinator.state.topic.num.partitions": (
        "share_coordinator_state_topic_num_partitions",
        _int(1, 100_000),
    ),
    "share.coordinator.snapshot.update.records.per.snapshot": (
        "share_coordinator_snapshot_update_records_per_snapshot",
        _int(0, 2**31 - 1),
    ),
    # transaction coordinator (__transaction_state)
    "transaction.state.log.num.partitions": ("transaction_state_log_num_partitions", _int(1, 100_000)),
    "transaction.state.log.segment.bytes": ("transaction_state_log_segment_bytes", _int(14, 2**31 - 1)),
    "transaction.max.timeout.ms": ("transaction_max_timeout_ms", _int(1, 2**31 - 1)),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (
        "transaction_abort_timed_out_transaction_cleanup_interval_ms",
        _int(1, 2**31 - 1),
    ),
    "transactional.id.expiration.ms": ("transactional_id_expiration_ms", _int(1, 2**31 - 1)),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (
        "transaction_remove_expired_transaction_cleanup_interval_ms",
        _int(1, 2**31 - 1),
    ),
    # exactly's two-phase commit extension (docs/two-phase-commit.md; KIP-939's name for the switch)
    "transaction.two.phase.commit.enable": ("transaction_two_phase_commit_enable", _bool),
    # the finalized `transaction.version` feature level (KIP-890 part 2; Kafka sets it with kafka-features)
    "transaction.version": ("transaction_version", _int(0, 2)),
    "transaction.prepared.max.age.ms": ("transaction_prepared_max_age_ms", _int(-1, 2**62)),
    "transaction.two.phase.decisions.retained.batches": (
        "transaction_two_phase_decisions_retained_batches",
        _int(-1, 2**62),
    ),
    # authorization (exactly.security.authorizer)
    "authorizer.class.name": ("authorizer_class_name", _authorizer_class),
    "super.users": ("super_users", parse_super_users),
    "allow.everyone.if.no.acl.found": ("allow_everyone_if_no_acl_found", _bool),
    # testing only: the principal of a request is User:<its client id> (until SASL; loud WARNING at start)
    "exactly.debug.principal.by.client.id": ("debug_principal_by_client_id", _bool),
    # testing only: park the marker writer of every EndTxn at this step (see broker/transactions.py)
    "exactly.debug.end.txn.pause": ("debug_end_txn_pause", _pause_step),
    # testing only: every marker job waits this long before its first marker (slow markers on demand)
    "exactly.debug.marker.delay.ms": ("debug_marker_delay_ms", _int(0, 600_000)),
    # testing only: append every data-file fsync to this file (storage/files.py, the fsync ledger)
    "exactly.debug.fsync.ledger": ("debug_fsync_ledger", str),
    # open-file budget: segment files (storage/file_handles.py); connections (broker/connection_slots.py)
    "exactly.log.max.open.files": ("log_max_open_files", _int(-1, 2**31 - 1)),
    # page cache drop-behind after each segment fsync (storage/drop_behind.py)
    "exactly.log.drop.behind.bytes": ("log_drop_behind_bytes", _int(-1)),
    "max.connections": ("max_connections", _int(0, 2**31 - 1)),
    # connections per client address and per listener (quotas/connections.py, broker/connection_slots.py)
    "max.connections.per.ip": ("max_connections_per_ip", _int(0, 2**31 - 1)),
    "max.connections.per.ip.overrides": ("max_connections_per_ip_overrides", parse_ip_overrides),
    # Prometheus metrics and health probes over HTTP (exactly.broker.metrics, docs/metrics.md)
    "metrics.listener": ("metrics_listener", metrics_listener),
    "metrics.per.partition.enable": ("metrics_per_partition", _bool),
    # the read-only web console under /console/ of the metrics listener (exactly.console, docs/console.md)
    "console.enable": ("console_enable", _bool),
    "console.hanging.transaction.ms": ("console_hanging_transaction_ms", _int(-1, 2**62)),
    # testing only: the handlers of these APIs raise (connection.py answers UNKNOWN_SERVER_ERROR)
    "exactly.debug.raise.in.api": ("debug_raise_in_api", _api_keys),
    # testing only: exit in the middle of a create (server.py `_create_logs`), as a crash would
    "exactly.debug.create.crash.after.partitions": ("debug_create_crash_after_partitions", _int(-1)),
    # testing only: the handlers of these APIs return a response that cannot be encoded (connection.py)
    "exactly.debug.unencodable.response.in.api": ("debug_unencodable_response_in_api", _api_keys),
}


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    node_id: int = 0
    # listeners, advertised.listeners, listener.security.protocol.map, inter.broker.listener.name as
    # written; `listeners` is what they resolve to (exactly.security.listeners)
    listener_endpoints: tuple[Endpoint, ...] = DEFAULT_ENDPOINTS
    advertised_endpoints: tuple[Endpoint, ...] | None = None
    listener_protocol_map: Mapping[str, SecurityProtocol] = field(
        default_factory=lambda: DEFAULT_PROTOCOL_MAP
    )
    inter_broker_listener_name: str | None = None
    listeners: tuple[Listener, ...] = DEFAULT_LISTENERS
    data_dir: Path = Path("exactly-data")  # the first log dir (log.dir, or the first of log.dirs)
    log_dirs: tuple[Path, ...] = ()  # log.dirs when set: every log dir (storage/log_manager.py)
    cluster_id: str = "exactly-cluster"
    num_partitions: int = 1
    default_replication_factor: int = 1
    zookeeper_connect: str = ""  # empty: one broker alone, no cluster
    zookeeper_session_timeout_ms: int = 18_000
    broker_rack: str | None = None
    replica_selector_class: str | None = None  # KIP-392; None: consumers always read from the leader
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1_048_576
    replica_fetch_response_max_bytes: int = 10_485_760
    replica_fetch_backoff_ms: int = 1000
    replica_socket_timeout_ms: int = 30_000
    offsets_topic_replication_factor: int = 3  # at most the live brokers when the topic is created
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5000
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    auto_create_topics: bool = True
    delete_topic_enable: bool = True
    socket_request_max_bytes: int = 104_857_600
    connections_max_idle_ms: int = 600_000
    failed_authentication_delay_ms: int = 100
    connections_max_reauth_ms: int = 0
    message_max_bytes: int = 1_048_588
    max_request_partition_size_limit: int = 2000  # DescribeTopicPartitions page size cap (KIP-966)
    quota_window_num: int = 11  # client quotas: samples of quota_window_size_seconds each
    quota_window_size_seconds: int = 1
    retention_check_interval_ms: int = 300_000
    producer_id_expiration_check_interval_ms: int = 600_000
    checkpoint_interval_ms: int = 60_000
    cleaner_backoff_ms: int = 15_000
    max_incremental_fetch_session_cache_slots: int = 1000
    offsets_topic_num_partitions: int = 50
    offsets_topic_segment_bytes: int = 104_857_600
    offsets_retention_ms: int = 10080 * 60_000  # offsets.retention.minutes = 7 days
    offsets_retention_check_interval_ms: int = 600_000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_min_session_timeout_ms: int = 45_000
    group_consumer_max_session_timeout_ms: int = 60_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_min_heartbeat_interval_ms: int = 5_000
    group_consumer_max_heartbeat_interval_ms: int = 15_000
    group_consumer_max_size: int = 2**31 - 1
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    group_consumer_migration_policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL
    group_share_enable: bool = False
    group_share_session_timeout_ms: int = 45_000
    group_share_heartbeat_interval_ms: int = 5_000
    group_share_max_size: int = 200
    group_share_record_lock_duration_ms: int = 30_000
    group_share_delivery_count_limit: int = 5
    group_share_partition_max_record_locks: int = 200
    share_auto_offset_reset: str = "latest"
    share_isolation_level: str = "read_uncommitted"
    share_transactional_ack_enable: bool = False
    share_coordinator_state_topic_num_partitions: int = 50
    share_coordinator_snapshot_update_records_per_snapshot: int = 500
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_segment_bytes: int = 104_857_600
    transaction_max_timeout_ms: int = 900_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    transaction_two_phase_commit_enable: bool = True
    # finalized transaction.version: 2 lets TV2 clients bump the epoch at every end (EndTxn v5, implicit
    # adds); 1 pins transaction version 1 (compatibility tests); 0 also writes TransactionLogValue v0
    transaction_version: int = 2
    transaction_prepared_max_age_ms: int = 604_800_000  # 7 days; -1: never
    transaction_two_phase_decisions_retained_batches: int = 100  # minBatchesToRetain; -1: keep all
    authorizer_class_name: str = ""  # empty: no authorizer, everything allowed
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    debug_principal_by_client_id: bool = False
    debug_end_txn_pause: str = ""
    debug_marker_delay_ms: int = 0
    debug_fsync_ledger: str = ""
    debug_raise_in_api: frozenset[int] = frozenset()
    log_max_open_files: int = -1  # -1: a quarter of the open-file limit (storage/file_handles.py)
    log_drop_behind_bytes: int = -1  # -1: off (storage/drop_behind.py)
    max_connections: int = 2**31 - 1  # and at most the open-file limit's share (connection_slots.py)
    max_connections_per_ip: int = 2**31 - 1
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)  # host -> limit
    # listener.name.<listener>.max.connections, by listener name (upper case, as `listeners` names them)
    listener_max_connections: Mapping[str, int] = field(default_factory=dict)
    debug_create_crash_after_partitions: int = -1
    metrics_listener: tuple[str, int] | None = None  # (host, port) of /metrics, /healthz, /readyz; None: off
    metrics_per_partition: bool = True  # kafka_log_log_* and the LSO lag per partition (cardinality)
    console_enable: bool = False  # the web console under /console/ of metrics.listener
    console_hanging_transaction_ms: int = -1  # older open transactions show as hanging (-1: the max timeout)
    debug_unencodable_response_in_api: frozenset[int] = frozenset()
    log: LogConfig = field(default_factory=LogConfig)
    # the Kafka-named settings this config was built from (server.properties, --set): STATIC_BROKER_CONFIG
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def all_log_dirs(self) -> tuple[Path, ...]:
        """Every log dir: log.dirs, or the data dir alone."""
        if self.log_dirs and self.log_dirs[0] == self.data_dir:
            return self.log_dirs
        return (self.data_dir,)

    @property
    def listen(self) -> tuple[str, int]:
        """The first listener's address."""
        first = self.listeners[0]
        return first.host, first.port

    @property
    def advertised(self) -> tuple[str, int]:
        """The first listener's advertised address."""
        first = self.listeners[0]
        return first.advertised_host, first.advertised_port

    @classmethod
    def from_properties(cls, props: Mapping[str, str], **fixed: object) -> BrokerConfig:
        """Build from Kafka names; `fixed` are already-parsed fields (CLI flags) that win over `props`."""
        known: dict[str, str] = {}
        for name, raw in props.items():
            if name in BROKER_CONFIGS or listener_config_base(name) is not None:
                known[name] = raw
            else:
                log.warning("ignoring unknown config %s", name)
        values = _parse_fields(known, ConfigError)
        dirs = values.get("log_dirs")
        if isinstance(dirs, tuple) and dirs:  # log.dirs wins over log.dir, as in Kafka
            values["data_dir"] = dirs[0]
        _check_security_values(known)
        try:
            values.update(_connection_limits(known, known))
        except KafkaError as e:
            raise ConfigError(e.message) from None
        try:
            log_config = LogConfig.from_properties(_topic_defaults(known, known))
        except KafkaError as e:
            raise ConfigError(f"invalid log config: {e.message}") from None
        values.update(fixed)
        try:
            values["listeners"] = resolve_listeners(
                values.get("listener_endpoints", DEFAULT_ENDPOINTS),  # type: ignore[arg-type]
                values.get("advertised_endpoints"),  # type: ignore[arg-type]
                values.get("listener_protocol_map", DEFAULT_PROTOCOL_MAP),  # type: ignore[arg-type]
                values.get("inter_broker_listener_name"),  # type: ignore[arg-type]
            )
        except ValueError as e:
            raise ConfigError(f"invalid listeners: {e}") from None
        values["log"] = log_config
        values["properties"] = dict(known)
        config = cls(**values)  # type: ignore[arg-type]
        config.check_consumer_group_configs()
        if config.console_enable and config.metrics_listener is None:
            raise ConfigError("console.enable=true needs metrics.listener: the console is served there")
        return config

    def check_consumer_group_configs(self) -> None:
        """Kafka's `GroupCoordinatorConfig` checks: each KIP-848 timeout within its min and max, and the
        heartbeat interval below the session timeout (ConfigError otherwise)."""
        checks = [
            (
                "group.consumer.session.timeout.ms",
                self.group_consumer_min_session_timeout_ms,
                self.group_consumer_session_timeout_ms,
                self.group_consumer_max_session_timeout_ms,
            ),
            (
                "group.consumer.heartbeat.interval.ms",
                self.group_consumer_min_heartbeat_interval_ms,
                self.group_consumer_heartbeat_interval_ms,
                self.group_consumer_max_heartbeat_interval_ms,
            ),
        ]
        for name, lo, value, hi in checks:
            if not lo <= value <= hi:
                raise ConfigError(f"{name}={value} must be between its min ({lo}) and max ({hi})")
        if self.group_consumer_heartbeat_interval_ms >= self.group_consumer_session_timeout_ms:
            raise ConfigError(
                "group.consumer.heartbeat.interval.ms must be below group.consumer.session.timeout.ms"
            )

    def with_dynamic(self, dynamic: Mapping[str, str]) -> BrokerConfig:
        """This static config with run-time broker configs layered on top (KafkaError INVALID_CONFIG).

        As in Kafka, the layers are merged before synonyms are resolved: a static `log.retention.ms`
        still wins over a dynamic `log.retention.hours`.
        """
        if not dynamic:
            return self
        values = _parse_fields(dynamic, None)
        merged = {**self.properties, **dynamic}
        values.update(_connection_limits(merged, dynamic))
        values["log"] = LogConfig.from_properties(_topic_defaults(merged, dynamic), base=self.log)
        return dataclasses.replace(self, **values)  # type: ignore[arg-type]

    @classmethod
    def load(
        cls, path: Path | None = None, overrides: Mapping[str, str] | None = None, **fixed: object
    ) -> BrokerConfig:
        props: dict[str, str] = {}
        if path is not None:
            props.update(read_properties(path))
        props.update(overrides or {})
        return cls.from_properties(props, **fixed)


def _parse_fields(props: Mapping[str, str], error: type[ConfigError] | None) -> dict[str, object]:
    """BrokerConfig fields from the Kafka names in `props` that have one."""
    values: dict[str, object] = {}
    for name, raw in props.items():
        if name not in _BROKER_KEYS:
            continue
        attr, parse = _BROKER_KEYS[name]
        try:
            values[attr] = parse(raw)
        except ValueError as e:
            if error is None:
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG, f"Invalid value {raw} for configuration {name}: {e}"
                ) from None
            raise error(f"invalid value for {name}: {e}") from None
    return values


_LISTENER_MAX_CONNECTIONS = re.compile(r"^listener\.name\.([a-z0-9_.-]+?)\.max\.connections$", re.IGNORECASE)


def _connection_limits(props: Mapping[str, str], changed: Mapping[str, str]) -> dict[str, object]:
    """`listener_max_connections` from every `listener.name.<l>.max.connections` in `props` (when one is
    in `changed`), and Kafka's rule on max.connections.per.ip and its overrides (KafkaError
    INVALID_CONFIG)."""
    values: dict[str, object] = {}
    if any(_LISTENER_MAX_CONNECTIONS.match(name) for name in changed):
        limits: dict[str, int] = {}
        for name, raw in props.items():
            match = _LISTENER_MAX_CONNECTIONS.match(name)
            if match is None:
                continue
            try:
                limits[match.group(1).upper()] = _int(0, 2**31 - 1)(raw)
            except ValueError as e:
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG, f"Invalid value {raw} for configuration {name}: {e}"
                ) from None
        values["listener_max_connections"] = limits
    if "max.connections.per.ip" in changed or "max.connections.per.ip.overrides" in changed:
        try:
            per_ip = _int(0, 2**31 - 1)(props.get("max.connections.per.ip", str(2**31 - 1)))
            check_per_ip(per_ip, parse_ip_overrides(props.get("max.connections.per.ip.overrides", "")))
        except ValueError as e:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None
    return values


def _check_security_values(props: Mapping[str, str]) -> None:
    """The `ssl.*` values (and their `listener.name.<name>.` forms) are valid for their type; files and the
    consistency of a listener's settings are checked when the broker builds its TLS contexts."""
    for name, raw in props.items():
        base = listener_config_base(name) or name
        if not base.startswith("ssl."):
            continue
        try:
            BROKER_CONFIGS[base].parse(raw)
        except KafkaError as e:
            raise ConfigError(e.message.replace(f"configuration {base}", f"configuration {name}")) from None


def _topic_defaults(props: Mapping[str, str], changed: Mapping[str, str]) -> dict[str, str]:
    """Topic-config values that the broker synonyms in `props` give, for the topic configs that have a
    synonym in `changed` (Kafka's `extractLogConfigMap`)."""
    out: dict[str, str] = {}
    for definition in TOPIC_CONFIGS.values():
        if not any(s.name in changed for s in definition.synonyms):
            continue
        for synonym in definition.synonyms:
            if synonym.name in props:
                BROKER_CONFIGS[synonym.name].parse(props[synonym.name])  # KafkaError when invalid
        found = broker_default(definition, props)
        if found is not None:
            out[definition.name] = found[0]
    if "producer.id.expiration.ms" in changed:
        out["producer.id.expiration.ms"] = props["producer.id.expiration.ms"]
    return out


def read_properties(path: Path) -> dict[str, str]:
    """Parse a Java-style properties file (the subset Kafka's configs use)."""
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
    props: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in stripped:
                key, _, value = stripped.partition(sep)
                props[key.strip()] = value.strip()
                break
        else:
            raise ConfigError(f"{path}:{number}: expected key=value, got {stripped!r}")
    return props


def parse_overrides(items: list[str]) -> dict[str, str]:
    """`--set key=value` items."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out
