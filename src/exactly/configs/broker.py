"""Every broker config exactly knows: type, Kafka's default, documentation, dynamic or read-only.

Three kinds:

* exactly's broker settings (`node.id`, `listeners`, coordinator settings, ...): read-only, except the
  few Kafka also changes at run time (`log.cleaner.backoff.ms`, `producer.id.expiration.ms`, ...).
* the broker synonyms of topic configs (`log.retention.ms`, `log.segment.bytes`, `message.max.bytes`,
  `compression.type`, ...): dynamic, as in Kafka's `DynamicLogConfig`; they are the default of every topic
  without its own override, and a change applies to those topics at once.
* thread counts of Kafka's `DynamicThreadPool` / `LogCleaner` (`num.io.threads`, `log.cleaner.threads`,
  ...): dynamic, accepted, stored and described, without effect (exactly has one event loop).
* every other config of Kafka 4's broker (`broker_accepted.py`: KRaft, share groups, tiered storage,
  Kerberos, ...): Kafka's type, default and update mode, accepted and described without effect.

`BROKER_CONFIGS` is keyed by name; `synonym_group(name)` is Kafka's `brokerConfigSynonyms` (the configs
that set the same value, in priority order: `log.retention.ms`, `log.retention.minutes`, ...).
"""

from __future__ import annotations

import dataclasses
import re

from exactly.configs.broker_accepted import ACCEPTED_BROKER_CONFIGS
from exactly.configs.definition import INT_MAX, LONG_MAX, ConfigDef, ConfigType, OneOf, Range
from exactly.configs.topic import TOPIC_CONFIGS

BOOLEAN, STRING, INT, LONG, DOUBLE, LIST, PASSWORD = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
    ConfigType.PASSWORD,
)

# Broker names of topic-config synonyms whose type or default differs from the topic config's
# (Kafka's hours/minutes variants and the configs whose default is "unset").
_SYNONYM_OVERRIDES: dict[str, tuple[ConfigType, str | None, str]] = {
    "log.roll.ms": (LONG, None, "The maximum time before a new segment is rolled (ms); else log.roll.hours."),
    "log.roll.hours": (INT, "168", "The maximum time before a new segment is rolled (hours)."),
    "log.roll.jitter.ms": (LONG, None, "The maximum jitter subtracted from the roll time (ms)."),
    "log.roll.jitter.hours": (INT, "0", "The maximum jitter subtracted from the roll time (hours)."),
    "log.retention.ms": (LONG, None, "How long to keep a segment (ms); else log.retention.minutes."),
    "log.retention.minutes": (INT, None, "How long to keep a segment (minutes); else log.retention.hours."),
    "log.retention.hours": (INT, "168", "How long to keep a segment (hours)."),
    "log.flush.interval.ms": (LONG, None, "Fsync data this old (ms); else log.flush.scheduler.interval.ms."),
    "log.flush.scheduler.interval.ms": (LONG, str(LONG_MAX), "How often the flusher checks the logs (ms)."),
}


def _synonym_defs() -> list[ConfigDef]:
    out = []
    for topic in TOPIC_CONFIGS.values():
        for synonym in topic.synonyms:
            type_, default, doc = _SYNONYM_OVERRIDES.get(
                synonym.name, (topic.type, topic.default, f"The default {topic.name} of topics. {topic.doc}")
            )
            validator = topic.validator if synonym.factor == 1 else Range(1 if "roll" in synonym.name else -1)
            if synonym.name == "log.roll.jitter.hours":
                validator = Range(0)
            out.append(ConfigDef(synonym.name, type_, default, doc, validator, dynamic=True))
    return out


def _rw(
    name: str, type_: ConfigType, default: str | None, doc: str, validator: Range | None = None
) -> ConfigDef:
    return ConfigDef(name, type_, default, doc, validator, dynamic=True)


def _ro(
    name: str, type_: ConfigType, default: str | None, doc: str, validator: Range | OneOf | None = None
) -> ConfigDef:
    return ConfigDef(name, type_, default, doc, validator)


def _secret(name: str, doc: str) -> ConfigDef:
    """A Kafka PASSWORD config: described with a null value and is_sensitive, as Kafka does."""
    return ConfigDef(name, PASSWORD, None, doc, sensitive=True)


# TLS (exactly.security.tls). Each may also be given per listener as listener.name.<name>.ssl.* .
_SSL_DEFS = [
    _ro("ssl.keystore.type", STRING, "JKS", "The key store's format: exactly reads PEM only."),
    _ro("ssl.keystore.location", STRING, None, "A PEM file with the private key and the certificate chain."),
    _secret("ssl.keystore.password", "The key store's password (unused by PEM key stores)."),
    _secret("ssl.keystore.certificate.chain", "The certificate chain, inline PEM (with ssl.keystore.key)."),
    _secret("ssl.keystore.key", "The private key, inline PEM (with ssl.keystore.certificate.chain)."),
    _secret("ssl.key.password", "The password of an encrypted private key."),
    _ro("ssl.truststore.type", STRING, "JKS", "The trust store's format: exactly reads PEM only."),
    _ro("ssl.truststore.location", STRING, None, "A PEM file of the CAs client certificates are checked by."),
    _secret("ssl.truststore.password", "The trust store's password (unused by PEM trust stores)."),
    _secret("ssl.truststore.certificates", "The trusted CA certificates, inline PEM."),
    _ro(
        "ssl.enabled.protocols",
        LIST,
        "TLSv1.2,TLSv1.3",
        "The TLS versions a client may use.",
        OneOf(("TLSv1.2", "TLSv1.3")),
    ),
    _ro("ssl.protocol", STRING, "TLSv1.3", "The highest TLS version.", OneOf(("TLS", "TLSv1.2", "TLSv1.3"))),
    _ro("ssl.cipher.suites", LIST, "", "The TLS 1.2 cipher suites (IANA or OpenSSL names; empty: all)."),
    _ro(
        "ssl.client.auth",
        STRING,
        "none",
        "Whether clients must present a certificate: required, requested or none.",
        OneOf(("required", "requested", "none")),
    ),
    _ro(
        "ssl.principal.mapping.rules",
        STRING,
        "DEFAULT",
        "Rules mapping a client certificate's subject DN to its principal (RULE:pattern/replacement/[LU]).",
    ),
    _ro(
        "ssl.endpoint.identification.algorithm",
        STRING,
        "https",
        "Client-side host name verification (accepted; a broker does not verify its clients' host names).",
    ),
]

# SASL (exactly.security.sasl). sasl.enabled.mechanisms may be given per listener too, and the JAAS config
# per listener and mechanism: listener.name.<name>.<mechanism>.sasl.jaas.config (Kafka's form).
_SASL_DEFS = [
    _ro(
        "sasl.enabled.mechanisms",
        LIST,
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "The SASL mechanisms a SASL listener offers (exactly has PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and, "
        "for development, OAUTHBEARER with unsecured tokens).",
    ),
    _ro(
        "sasl.mechanism.inter.broker.protocol",
        STRING,
        "GSSAPI",
        "The SASL mechanism brokers authenticate to each other with on a SASL inter-broker listener "
        "(PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512: exactly has no GSSAPI, Kafka's default); the credentials "
        "are the username and password of listener.name.<l>.<mechanism>.sasl.jaas.config.",
    ),
    _secret(
        "sasl.jaas.config",
        'PlainLoginModule users (user_<name>="<password>"); without any, PLAIN checks SCRAM credentials.',
    ),
    _ro(
        "connection.failed.authentication.delay.ms",
        INT,
        "100",
        "How long a failed authentication waits before its answer and close, against password guessing.",
        Range(0),
    ),
    _ro(
        "connections.max.reauth.ms",
        LONG,
        "0",
        "Accepted; re-authentication is not built (0: never).",
        Range(0),
    ),
]

_LISTENER_PREFIXED = re.compile(
    r"^listener\.name\.([a-z0-9_.-]+?)\.((?:ssl|sasl)\..+|[a-z0-9-]+\.sasl\.jaas\.config"
    r"|max\.connections|max\.connection\.creation\.rate)$"
)
_MECHANISM_JAAS = re.compile(r"^[a-z0-9-]+\.(sasl\.jaas\.config)$")


def listener_config_base(name: str) -> str | None:
    """The broker config a `listener.name.<listener>.<config>` name overrides for one listener (None when
    `name` is not of that form or names no known config)."""
    match = _LISTENER_PREFIXED.match(name)
    if match is None:
        return None
    base = match.group(2)
    mechanism_jaas = _MECHANISM_JAAS.match(base)
    if mechanism_jaas is not None and not base.startswith("sasl."):
        base = mechanism_jaas.group(1)
    return base if base in BROKER_CONFIGS else None


_DEFS = [
    _ro("node.id", INT, "-1", "The id of this broker (its replica id).", Range(0, INT_MAX)),
    _ro("broker.id", INT, "-1", "Synonym of node.id.", Range(0, INT_MAX)),
    _ro(
        "listeners",
        STRING,
        "PLAINTEXT://:9092",
        "Where the broker listens: NAME://HOST:PORT, comma-separated.",
    ),
    _ro(
        "advertised.listeners",
        STRING,
        None,
        "The addresses clients are told to connect to, per listener name (default: listeners).",
    ),
    _ro(
        "listener.security.protocol.map",
        STRING,
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "The security protocol of each listener name: NAME:PROTOCOL, comma-separated.",
    ),
    _ro(
        "inter.broker.listener.name",
        STRING,
        None,
        "The listener brokers use between them (one broker: validated only).",
    ),
    _ro("log.dirs", LIST, None, "The directories of the broker's partitions, comma-separated."),
    _ro("log.dir", STRING, "/tmp/kafka-logs", "The data directory when log.dirs is not set."),
    _ro("cluster.id", STRING, "exactly-cluster", "The id of the cluster (exactly: a setting)."),
    _ro("num.partitions", INT, "1", "The default number of partitions of a new topic.", Range(1)),
    _ro(
        "default.replication.factor",
        INT,
        "1",
        "The replication factor of a topic created without one.",
        Range(1),
    ),
    # the replicated cluster (exactly.broker.cluster_member): Kafka's ZooKeeper-mode names and defaults
    _ro("zookeeper.connect", STRING, None, "ZooKeeper's host:port[,...][/chroot]; unset: one broker alone."),
    _ro("zookeeper.session.timeout.ms", INT, "18000", "The ZooKeeper session timeout.", Range(1)),
    _ro(
        "zookeeper.connection.timeout.ms",
        INT,
        None,
        "How long to wait to connect (default: the session timeout).",
    ),
    _ro("broker.rack", STRING, None, "The rack of this broker (rack-aware replica assignment, KIP-392)."),
    _ro(
        "replica.selector.class",
        STRING,
        None,
        "How the leader picks a consumer's preferred read replica (KIP-392): "
        "org.apache.kafka.common.replica.RackAwareReplicaSelector (the client's rack), "
        "or unset (the leader).",
    ),
    _ro(
        "replica.lag.time.max.ms",
        LONG,
        "30000",
        "A follower that has not caught up this long leaves the ISR.",
        Range(1),
    ),
    _ro("replica.fetch.wait.max.ms", INT, "500", "How long a follower's fetch waits for data.", Range(0)),
    _ro("replica.fetch.min.bytes", INT, "1", "The least data a follower's fetch waits for.", Range(1)),
    _ro("replica.fetch.max.bytes", INT, "1048576", "A follower's fetch size per partition.", Range(0)),
    _ro("replica.fetch.response.max.bytes", INT, "10485760", "A follower's fetch size in all.", Range(0)),
    _ro("replica.fetch.backoff.ms", INT, "1000", "How long a follower waits after a failed fetch.", Range(0)),
    _ro(
        "replica.socket.timeout.ms",
        INT,
        "30000",
        "How long a follower waits for the leader's answer.",
        Range(1),
    ),
    _ro(
        "offsets.topic.replication.factor",
        ConfigType.SHORT,
        "3",
        "The replication factor of __consumer_offsets.",
        Range(1),
    ),
    _ro(
        "transaction.state.log.replication.factor",
        ConfigType.SHORT,
        "3",
        "The replication factor of __transaction_state.",
        Range(1),
    ),
    _ro("transaction.state.log.min.isr", INT, "2", "min.insync.replicas of __transaction_state.", Range(1)),
    _ro("controlled.shutdown.enable", BOOLEAN, "true", "Move leadership away before stopping."),
    _ro("controlled.shutdown.max.retries", INT, "3", "Controlled-shutdown attempts before stopping anyway."),
    _ro(
        "controlled.shutdown.retry.backoff.ms", LONG, "5000", "The wait between controlled-shutdown attempts."
    ),
    _ro("auto.leader.rebalance.enable", BOOLEAN, "true", "Move leadership back to preferred replicas."),
    _ro(
        "leader.imbalance.check.interval.seconds", LONG, "300", "How often the controller checks the balance."
    ),
    _ro(
        "leader.imbalance.per.broker.percentage", INT, "10", "The imbalance a broker may have.", Range(0, 100)
    ),
    _ro(
        "auto.create.topics.enable", BOOLEAN, "true", "Create a topic when a client asks for an unknown one."
    ),
    _ro("delete.topic.enable", BOOLEAN, "true", "Whether DeleteTopics deletes."),
    _ro("socket.request.max.bytes", INT, "104857600", "The largest request the broker reads.", Range(1)),
    _ro("connections.max.idle.ms", LONG, "600000", "Close connections idle this long (-1: never)."),
    _rw(
        "max.connections",
        INT,
        "2147483647",
        "The most connections the broker holds at once (and at most the open-file limit less the segment "
        "files' budget and a tenth); beyond it new connections wait to be accepted. Per listener: "
        "listener.name.<listener>.max.connections (that listener stops accepting at its own limit).",
        Range(0),
    ),
    _rw(
        "max.connections.per.ip",
        INT,
        "2147483647",
        "The most connections one client address may hold; a connection beyond it is closed at once after "
        "accept (0 only with max.connections.per.ip.overrides).",
        Range(0),
    ),
    _rw(
        "max.connections.per.ip.overrides",
        STRING,
        "",
        "Per-address limits that replace max.connections.per.ip: host:count,host2:count (a host is an IP "
        "address or a name).",
    ),
    _ro("log.retention.check.interval.ms", LONG, "300000", "How often retention is checked.", Range(1)),
    _ro(
        "log.flush.offset.checkpoint.interval.ms",
        INT,
        "60000",
        "How often recovery points are saved.",
        Range(0),
    ),
    _ro(
        "producer.id.expiration.check.interval.ms", INT, "600000", "How often idle producer ids are removed."
    ),
    _rw(
        "producer.id.expiration.ms", INT, "86400000", "How long an idle producer id is remembered.", Range(1)
    ),
    _rw(
        "log.cleaner.backoff.ms",
        LONG,
        "15000",
        "How long the cleaner sleeps when no log needs cleaning.",
        Range(0),
    ),
    _rw(
        "log.cleaner.threads", INT, "1", "Cleaner threads (accepted; exactly has one cleaner task).", Range(0)
    ),
    _rw("log.cleaner.dedupe.buffer.size", LONG, "134217728", "Cleaner dedupe memory (accepted)."),
    _rw("log.cleaner.io.buffer.size", INT, "524288", "Cleaner I/O buffer (accepted).", Range(0)),
    _rw("log.cleaner.io.buffer.load.factor", DOUBLE, "0.9", "Cleaner dedupe buffer load factor (accepted)."),
    _rw(
        "log.cleaner.io.max.bytes.per.second", DOUBLE, "1.7976931348623157E308", "Cleaner I/O cap (accepted)."
    ),
    _rw("num.io.threads", INT, "8", "Request handler threads (accepted; one event loop).", Range(1)),
    _rw("num.network.threads", INT, "3", "Network threads (accepted; one event loop).", Range(1)),
    _rw("background.threads", INT, "10", "Background task threads (accepted).", Range(1)),
    _rw(
        "num.recovery.threads.per.data.dir",
        INT,
        "2",
        "Recovery threads per data directory (accepted).",
        Range(1),
    ),
    _rw("num.replica.fetchers", INT, "1", "Replica fetcher threads (accepted; one broker).", Range(1)),
    _ro("offsets.topic.num.partitions", INT, "50", "Partitions of __consumer_offsets.", Range(1)),
    _ro("offsets.topic.segment.bytes", INT, "104857600", "Segment size of __consumer_offsets.", Range(1)),
    _ro(
        "offsets.retention.minutes",
        INT,
        "10080",
        "How long committed offsets of an empty group live.",
        Range(1),
    ),
    _ro(
        "offsets.retention.check.interval.ms",
        LONG,
        "600000",
        "How often stale offsets are looked for.",
        Range(1),
    ),
    _ro("group.min.session.timeout.ms", INT, "6000", "The smallest session timeout a member may ask."),
    _ro("group.max.session.timeout.ms", INT, "1800000", "The largest session timeout a member may ask."),
    _ro("group.initial.rebalance.delay.ms", INT, "3000", "How long the first rebalance of a group waits."),
    _ro("transaction.state.log.num.partitions", INT, "50", "Partitions of __transaction_state.", Range(1)),
    _ro(
        "transaction.state.log.segment.bytes",
        INT,
        "104857600",
        "Segment size of __transaction_state.",
        Range(1),
    ),
    _ro(
        "transaction.max.timeout.ms",
        INT,
        "900000",
        "The largest transaction timeout a producer may ask.",
        Range(1),
    ),
    _ro(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        INT,
        "10000",
        "How often timed-out transactions are aborted.",
        Range(1),
    ),
    _ro(
        "transactional.id.expiration.ms",
        INT,
        "604800000",
        "How long an idle transactional id lives.",
        Range(1),
    ),
    _ro(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        INT,
        "3600000",
        "How often expired transactional ids are removed.",
        Range(1),
    ),
    _ro(
        "group.share.enable",
        BOOLEAN,
        "false",
        "Share groups (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge and "
        "the share group offset APIs are advertised and served, and share.version=1 is a finalized feature "
        "(Kafka 4.1 turns them on with the share.version feature; they are a preview there).",
    ),
    _ro("group.share.session.timeout.ms", INT, "45000", "A share group member's session timeout.", Range(1)),
    _ro(
        "group.share.heartbeat.interval.ms",
        INT,
        "5000",
        "A share group member's heartbeat interval.",
        Range(1),
    ),
    _ro("group.share.max.size", INT, "200", "The most members of one share group.", Range(1, 1000)),
    _ro(
        "group.share.record.lock.duration.ms",
        INT,
        "30000",
        "How long a record acquired by a share group member stays locked to it.",
        Range(1000, 3600000),
    ),
    _ro(
        "group.share.delivery.count.limit",
        INT,
        "5",
        "Deliveries of one record to share group members before it is archived.",
        Range(2, 10),
    ),
    _ro(
        "group.share.partition.max.record.locks",
        INT,
        "200",
        "The most in-flight records of one share partition.",
        Range(100, 10000),
    ),
    _ro(
        "share.auto.offset.reset",
        STRING,
        "latest",
        "Where a share partition with no stored state starts: latest or earliest. Kafka's is a group config "
        "(GROUP resource); exactly has it as the broker-wide value for every share group.",
    ),
    _ro(
        "share.isolation.level",
        STRING,
        "read_uncommitted",
        "read_committed: share groups never receive records of aborted or open transactions. Kafka's is a "
        "group config (GROUP resource); exactly has it as the broker-wide value for every share group.",
    ),
    _ro(
        "share.coordinator.state.topic.num.partitions",
        INT,
        "50",
        "Partitions of __share_group_state (on creation).",
        Range(1),
    ),
    _ro(
        "share.coordinator.snapshot.update.records.per.snapshot",
        INT,
        "500",
        "ShareUpdate records the share coordinator writes for a share partition before the next write is a "
        "whole ShareSnapshot (0: snapshots only).",
        Range(0),
    ),
    _ro(
        "share.transactional.ack.enable",
        BOOLEAN,
        "false",
        "Whether exactly's transactional share-acknowledgement extension (AddShareAcksToTxn; "
        "docs/share-transactional-acks.md) is advertised and served: share group acknowledgements held "
        "by a producer's transaction, applied by its commit, released by its abort. "
        "Needs group.share.enable.",
    ),
    _ro(
        "transaction.two.phase.commit.enable",
        BOOLEAN,
        "true",
        "Whether the two-phase commit extension (PrepareTxn, CommitBatch, AbortBatch, ListPreparedTxns; "
        "docs/two-phase-commit.md) is advertised and served (KIP-939's name).",
    ),
    _ro(
        "transaction.version",
        INT,
        "2",
        "The finalized transaction.version feature level advertised in ApiVersions v3+ (KIP-890 part 2): "
        "2 lets clients use transaction version 2 (an epoch bump at every commit/abort, implicit adds); 1 "
        "keeps them on version 1; 0 also writes __transaction_state values as v0.",
        Range(0, 2),
    ),
    _ro(
        "transaction.prepared.max.age.ms",
        LONG,
        "604800000",
        "The safety timeout of a Prepared transaction: older ones are aborted (-1: never).",
        Range(-1),
    ),
    _ro(
        "transaction.two.phase.decisions.retained.batches",
        LONG,
        "100",
        "How many batch decisions of a query the two-phase commit extension keeps: CommitBatch of batch B "
        "writes tombstones for the query's decisions below B minus this (Spark's "
        "spark.sql.streaming.minBatchesToRetain; -1: keep them all).",
        Range(-1),
    ),
    _ro(
        "max.request.partition.size.limit",
        INT,
        "2000",
        "The most partitions one DescribeTopicPartitions response holds (KIP-966).",
        Range(1, INT_MAX),
    ),
    _ro(
        "max.incremental.fetch.session.cache.slots",
        INT,
        "1000",
        "The most incremental fetch sessions (KIP-227) the broker keeps.",
        Range(0, INT_MAX),
    ),
    _ro("quota.window.num", INT, "11", "Samples kept of each client quota's rate.", Range(1, 1000)),
    _ro("quota.window.size.seconds", INT, "1", "The time span of one quota sample.", Range(1, 3600)),
    _ro(
        "authorizer.class.name",
        STRING,
        "",
        "The authorizer: org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs), or empty (none).",
    ),
    _ro("super.users", STRING, "", "Principals allowed everything, semicolon-separated (User:admin)."),
    _ro(
        "allow.everyone.if.no.acl.found",
        BOOLEAN,
        "false",
        "With an authorizer: allow a request on a resource that has no ACL at all.",
    ),
    _ro(
        "exactly.debug.principal.by.client.id",
        BOOLEAN,
        "false",
        "Testing only: a request's principal is User:<its client id> (no authentication at all).",
    ),
    _ro("exactly.debug.end.txn.pause", STRING, "", "Testing only: park EndTxn marker writing at a step."),
    _ro(
        "exactly.debug.marker.delay.ms",
        INT,
        "0",
        "Testing only: delay every transaction marker write this long.",
        Range(0, 600_000),
    ),
    _ro(
        "exactly.debug.fsync.ledger",
        STRING,
        "",
        "Testing only: append '<file>\\t<length>' to this file after every fsync of a data file.",
    ),
    _ro(
        "exactly.log.max.open.files",
        INT,
        "-1",
        "Segment files kept open at once (an LRU; the others are reopened on use); -1: a quarter of the "
        "open-file limit, the rest is for connections (max.connections) and files opened for a moment.",
    ),
    _ro(
        "exactly.log.drop.behind.bytes",
        LONG,
        "-1",
        "After each fsync of a segment, drop from the page cache what lies more than this many bytes "
        "behind its synced end (posix_fadvise DONTNEED); -1: off, as in Kafka. For VMs that return free "
        "memory to their host, where growing the page cache costs a host fault per page; consumers "
        "further behind then read from the disk (storage/drop_behind.py).",
        Range(-1, LONG_MAX),
    ),
    _ro(
        "exactly.debug.raise.in.api",
        STRING,
        "",
        "Testing only: the handlers of these APIs (Kafka names, comma-separated) raise, as a bug would.",
    ),
    _ro(
        "exactly.debug.unencodable.response.in.api",
        STRING,
        "",
        "Testing only: the handlers of these APIs (Kafka names, comma-separated) answer something that "
        "cannot be encoded, as a bug would.",
    ),
    _ro(
        "exactly.debug.create.crash.after.partitions",
        INT,
        "-1",
        "Testing only: the broker exits after creating this many logs of a new topic (-1: never).",
    ),
    _ro(
        "metrics.listener",
        STRING,
        "",
        "Where Prometheus metrics (/metrics) and the health probes (/healthz, /readyz) are served over "
        "HTTP, as http://<host>:<port> (port 0: any free port); empty: not served, and no request "
        "timing or per-topic counting is done.",
    ),
    _ro(
        "metrics.per.partition.enable",
        BOOLEAN,
        "true",
        "Export per-partition series (log size, start and end offsets, LSO lag); false keeps the metric "
        "count independent of the partition count.",
    ),
    _ro(
        "console.enable",
        BOOLEAN,
        "false",
        "Serve the read-only web console under /console/ of metrics.listener (which must be set). With "
        "SASL or an authorizer configured, it asks for HTTP basic authentication checked against the "
        "SCRAM credentials (docs/console.md).",
    ),
    _ro(
        "console.hanging.transaction.ms",
        LONG,
        "-1",
        "The console shows a transaction open longer than this as hanging; -1: transaction.max.timeout.ms.",
    ),
    *_SSL_DEFS,
    *_SASL_DEFS,
    *_synonym_defs(),
    *ACCEPTED_BROKER_CONFIGS,
]

BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}

_GROUPS: dict[str, tuple[str, ...]] = {}
for _topic in TOPIC_CONFIGS.values():
    _names = tuple(s.name for s in _topic.synonyms)
    for _name in _names:
        _GROUPS[_name] = _names
_GROUPS["node.id"] = _GROUPS["broker.id"] = ("node.id", "broker.id")
_GROUPS["log.dirs"] = _GROUPS["log.dir"] = ("log.dirs", "log.dir")


def broker_config_def(name: str) -> ConfigDef | None:
    """The definition of a broker config, `listener.name.<listener>.<config>` names included (the base
    config's definition under the prefixed name); None for an unknown name."""
    definition = BROKER_CONFIGS.get(name)
    if definition is not None:
        return definition
    base = listener_config_base(name)
    return None if base is None else dataclasses.replace(BROKER_CONFIGS[base], name=name)


def synonym_group(name: str) -> tuple[str, ...]:
    """The broker configs that set the same value as `name`, highest priority first."""
    return _GROUPS.get(name, (name,))
