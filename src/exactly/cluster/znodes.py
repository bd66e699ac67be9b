"""Kafka's ZooKeeper layout (ZK mode, Kafka 3.x) and the JSON codecs of its znode values.

A cluster of exactly brokers keeps its shared state in ZooKeeper where and as Kafka 3.x did
(Kafka's `ZkData.scala`), so that Kafka's own knowledge, tools and docs about that tree apply, and
so that brokers, the controller and tests agree on one spelling of every path and value.

Layout (E = ephemeral, P = persistent, S = sequential; values are compact UTF-8 JSON unless noted):

    path                                         kind  value
    /brokers/ids/<id>                            E     BrokerRegistration; broker epoch = the znode's czxid
    /brokers/topics/<t>                          P     TopicAssignment (replica lists, first = preferred)
    /brokers/topics/<t>/partitions/<p>/state     P     PartitionState; partition epoch = its stat.version
    /controller                                  E     ControllerRegistration
    /controller_epoch                            P     bare decimal integer (encode_controller_epoch)
    /latest_producer_id_block                    P     ProducerIdBlock
    /config/<type>/<name>                        P     EntityConfig; type in CONFIG_TYPES
    /config/changes/config_change_<10 digits>    PS    ConfigChangeNotification
    /admin/delete_topics/<t>                     P     empty: topic t is marked for deletion
    /admin/reassign_partitions                   P     encode_reassignment (legacy trigger)
    /admin/preferred_replica_election            P     encode_preferred_election
    /exactly/controlled_shutdown/<id>            E     empty: broker <id> asks to be drained (exactly's own)

PERSISTENT_PATHS lists what every broker creates (with parents) at startup if missing.

Every `decode` raises `ZnodeFormatError`, with one readable line, on bytes that are not UTF-8 JSON, on a
missing field, or on a field of the wrong type or range (a JSON bool is not an int; ints that Kafka
reads as Java ints must fit 32 bits, longs 64). Fields Kafka writes but nobody reads (`jmx_port`,
`features`, the brokers' top-level `host`/`port`) are written and ignored when read.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from exactly.errors import ExactlyError

# ---------------------------------------------------------------------------------------------- paths

BROKER_IDS = "/brokers/ids"
BROKER_SEQID = "/brokers/seqid"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CONSUMERS = "/consumers"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN = "/admin/reassign_partitions"
PREFERRED_ELECTION = "/admin/preferred_replica_election"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "/config/changes/config_change_"
"""Create with sequence=True: ZooKeeper appends the 10-digit counter."""
CONTROLLED_SHUTDOWN = "/exactly/controlled_shutdown"

CONFIG_TYPES = ("topics", "clients", "users", "brokers", "ips")
"""Kafka's ConfigType.ALL, in its order (client-metrics is KRaft-only)."""

PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS,
    BROKER_IDS,
    TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    *(f"{CONFIG}/{t}" for t in CONFIG_TYPES),
    CONTROLLED_SHUTDOWN,
)
"""Kafka's ZkData.PersistentZkPaths in its order, then exactly's CONTROLLED_SHUTDOWN."""


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def config_type_path(entity_type: str) -> str:
    if entity_type not in CONFIG_TYPES:
        raise ValueError(f"unknown config entity type {entity_type!r}, expected one of {CONFIG_TYPES}")
    return f"{CONFIG}/{entity_type}"


def config_path(entity_type: str, name: str) -> str:
    """`/config/<type>/<name>`. Kafka stores user and client-id names sanitized (URL-encoded, Kafka's
    `Sanitizer`); the caller passes the name as it is to appear in the path."""
    return f"{config_type_path(entity_type)}/{name}"


def controlled_shutdown_path(broker_id: int) -> str:
    return f"{CONTROLLED_SHUTDOWN}/{broker_id}"


# ------------------------------------------------------------------------------------------- errors


class ZnodeFormatError(ExactlyError):
    """A znode's bytes are not the JSON (or decimal) this module expects."""


# ----------------------------------------------------------------------------------- JSON field access

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_DECIMAL = re.compile(r"[+-]?[0-9]{1,20}")


def _preview(data: bytes) -> str:
    text = repr(data[:60])
    return text + ("..." if len(data) > 60 else "")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _encode(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _parse_decimal(text: str, lo: int, hi: int) -> int | None:
    if not _DECIMAL.fullmatch(text):
        return None
    number = int(text)
    return number if lo <= number <= hi else None


class _Fields:
    """A decoded JSON object, with typed getters that raise ZnodeFormatError naming the znode."""

    __slots__ = ("_obj", "_what")

    def __init__(self, what: str, obj: Any) -> None:
        if not isinstance(obj, dict):
            raise ZnodeFormatError(f"{what}: expected a JSON object, got {type(obj).__name__}")
        self._what = what
        self._obj: dict[str, Any] = obj

    @classmethod
    def load(cls, what: str, data: bytes) -> _Fields:
        try:
            value = json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ZnodeFormatError(f"{what}: not UTF-8 JSON ({reason}): {_preview(data)}") from None
        return cls(what, value)

    def fail(self, key: str, expected: str) -> ZnodeFormatError:
        if key not in self._obj:
            return ZnodeFormatError(f"{self._what}: missing field {key!r}")
        got = self._obj[key]
        shown = repr(got) if len(repr(got)) <= 40 else repr(got)[:40] + "..."
        return ZnodeFormatError(f"{self._what}: field {key!r} should be {expected}, got {shown}")

    def has(self, key: str) -> bool:
        return key in self._obj

    def integer(self, key: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
        value = self._obj.get(key)
        if type(value) is not int or not lo <= value <= hi:
            raise self.fail(key, f"an integer in [{lo}, {hi}]")
        return value

    def long_string(self, key: str, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int:
        """A long written as a JSON string, as Kafka writes timestamps and producer ids."""
        value = self._obj.get(key)
        number = _parse_decimal(value, lo, hi) if isinstance(value, str) else None
        if number is None:
            raise self.fail(key, f"a decimal string in [{lo}, {hi}]")
        return number

    def timestamp(self, key: str) -> int:
        """A millisecond timestamp: Kafka writes a string; a bare JSON integer is accepted too."""
        if type(self._obj.get(key)) is int:
            return self.integer(key, INT64_MIN, INT64_MAX)
        return self.long_string(key)

    def string(self, key: str) -> str:
        value = self._obj.get(key)
        if not isinstance(value, str):
            raise self.fail(key, "a string")
        return value

    def optional_str(self, key: str) -> str | None:
        value = self._obj.get(key)
        if value is not None and not isinstance(value, str):
            raise self.fail(key, "a string or null")
        return value

    def int_list(self, key: str) -> tuple[int, ...]:
        value = self._obj.get(key)
        if not isinstance(value, list) or not all(
            type(v) is int and INT32_MIN <= v <= INT32_MAX for v in value
        ):
            raise self.fail(key, "a list of 32-bit integers")
        return tuple(value)

    def str_list(self, key: str) -> tuple[str, ...]:
        value = self._obj.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, "a list of strings")
        return tuple(value)

    def obj(self, key: str) -> dict[str, Any]:
        value = self._obj.get(key)
        if not isinstance(value, dict):
            raise self.fail(key, "a JSON object")
        return value

    def str_map(self, key: str) -> dict[str, str]:
        value = self.obj(key)
        if not all(isinstance(v, str) for v in value.values()):
            raise self.fail(key, "an object of string values")
        return value

    def objects(self, key: str) -> list[_Fields]:
        value = self._obj.get(key)
        if not isinstance(value, list):
            raise self.fail(key, "a list of objects")
        return [_Fields(f"{self._what} {key}[{i}]", item) for i, item in enumerate(value)]


def _frozen_lists(value: Mapping[int, Sequence[int]]) -> Mapping[int, tuple[int, ...]]:
    return MappingProxyType({int(k): tuple(v) for k, v in sorted(value.items())})


# ---------------------------------------------------------------------------------------- brokers

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's listener-string pattern (SocketServerConfigs.LISTENER_REGEX), IPv6 hosts in brackets.
_ENDPOINT = re.compile(r"([^:/\[\]]+)://(?:\[([^\]]*)\]|([^\[\]]*)):(-?[0-9]{1,10})")


@dataclass(frozen=True, slots=True)
class RegisteredEndpoint:
    """One advertised listener of a broker: `NAME://host:port` plus its security protocol."""

    listener: str
    host: str
    port: int
    security_protocol: str

    def connection_string(self) -> str:
        """Kafka's `EndPoint.connectionString`: IPv6 hosts (containing ':') go in brackets."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """The ephemeral `/brokers/ids/<id>`: how to reach a live broker (Kafka's v5 broker JSON).

        {"version":5,"host":"h","port":9092,"jmx_port":-1,"timestamp":"1700000000000",
         "endpoints":["PLAINTEXT://h:9092","SSL://h:9093"],
         "listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","SSL":"SSL"},
         "rack":"r1","features":{}}

    `host`/`port` copy the first PLAINTEXT endpoint (null/-1 without one); `rack` appears only if set.
    Decoding also reads Kafka's older versions: v1 has only host/port (one PLAINTEXT endpoint), v2-v3
    lack the protocol map (listener names are then protocol names).
    """

    VERSION: ClassVar[int] = 5

    broker_id: int
    endpoints: tuple[RegisteredEndpoint, ...]
    rack: str | None
    timestamp_ms: int

    def endpoint(self, listener: str) -> RegisteredEndpoint | None:
        return next((e for e in self.endpoints if e.listener == listener), None)

    def encode(self) -> bytes:
        plaintext = next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)
        value: dict[str, Any] = {
            "version": self.VERSION,
            "host": plaintext.host if plaintext else None,
            "port": plaintext.port if plaintext else -1,
            "jmx_port": -1,
            "timestamp": str(self.timestamp_ms),
            "endpoints": [e.connection_string() for e in self.endpoints],
            "listener_security_protocol_map": {e.listener: e.security_protocol for e in self.endpoints},
        }
        if self.rack is not None:
            value["rack"] = self.rack
        value["features"] = {}
        return _encode(value)

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> BrokerRegistration:
        what = f"broker {broker_id} registration"
        f = _Fields.load(what, data)
        version = f.integer("version")
        if version < 1:
            raise ZnodeFormatError(f"{what}: unsupported version {version}")
        if version == 1:
            endpoints: tuple[RegisteredEndpoint, ...] = (
                RegisteredEndpoint("PLAINTEXT", f.string("host"), f.integer("port"), "PLAINTEXT"),
            )
        else:
            protocols = (
                f.str_map("listener_security_protocol_map")
                if f.has("listener_security_protocol_map")
                else {p: p for p in SECURITY_PROTOCOLS}
            )
            endpoints = tuple(_decode_endpoint(what, s, protocols) for s in f.str_list("endpoints"))
        return cls(broker_id, endpoints, f.optional_str("rack"), f.timestamp("timestamp"))


def _decode_endpoint(what: str, text: str, protocols: Mapping[str, str]) -> RegisteredEndpoint:
    match = _ENDPOINT.fullmatch(text)
    if match is None:
        raise ZnodeFormatError(f"{what}: endpoint {text[:60]!r} is not LISTENER://host:port")
    listener, bracketed, plain, port_text = match.groups()
    port = _parse_decimal(port_text, INT32_MIN, INT32_MAX)
    if port is None:
        raise ZnodeFormatError(f"{what}: endpoint {text[:60]!r} has a port out of range")
    protocol = protocols.get(listener)
    if protocol not in SECURITY_PROTOCOLS:
        raise ZnodeFormatError(
            f"{what}: listener {listener[:40]!r} has no known security protocol (got {protocol!r})"
        )
    host = bracketed if bracketed is not None else plain
    return RegisteredEndpoint(listener, host, port, protocol)


# -------------------------------------------------------------------------------------- controller


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    """The ephemeral `/controller`: which broker is the controller.

    {"version":2,"brokerid":1,"timestamp":"1700000000000","kraftControllerEpoch":-1}
    (the last field exists for the KRaft migration and is always -1 here)."""

    broker_id: int
    timestamp_ms: int

    def encode(self) -> bytes:
        return _encode(
            {
                "version": 2,
                "brokerid": self.broker_id,
                "timestamp": str(self.timestamp_ms),
                "kraftControllerEpoch": -1,
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> ControllerRegistration:
        f = _Fields.load("controller registration", data)
        return cls(f.integer("brokerid"), f.timestamp("timestamp"))


def encode_controller_epoch(epoch: int) -> bytes:
    """`/controller_epoch` holds a bare decimal integer (it starts at 0)."""
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        text = ""
    epoch = _parse_decimal(text, INT32_MIN, INT32_MAX)
    if epoch is None:
        raise ZnodeFormatError(f"controller epoch: not a 32-bit decimal integer: {_preview(data)}")
    return epoch


# -------------------------------------------------------------------------------------- partitions

NO_LEADER = -1
"""`leader` of a partition without one (UpdateMetadata, not ZooKeeper, uses -2 during deletion)."""
RECOVERED = 0
RECOVERING = 1
"""KIP-704 leader recovery states: RECOVERING after an unclean election, until the leader recovers."""


@dataclass(frozen=True, slots=True)
class PartitionState:
    """`/brokers/topics/<t>/partitions/<p>/state`: leader, leader epoch and ISR, written by the
    controller (leader elections) and by leaders (ISR changes), always conditionally on the znode's
    version, which is the partition epoch and so is not stored here.

        {"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2,3]}

    plus "leader_recovery_state":1 only while RECOVERING."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = RECOVERED

    def encode(self) -> bytes:
        value: dict[str, Any] = {
            "controller_epoch": self.controller_epoch,
            "leader": self.leader,
            "version": 1,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
        }
        if self.leader_recovery_state == RECOVERING:
            value["leader_recovery_state"] = RECOVERING
        return _encode(value)

    @classmethod
    def decode(cls, data: bytes) -> PartitionState:
        f = _Fields.load("partition state", data)
        recovery = (
            f.integer("leader_recovery_state", RECOVERED, RECOVERING) if f.has("leader_recovery_state") else 0
        )
        return cls(
            f.integer("leader"),
            f.integer("leader_epoch"),
            f.int_list("isr"),
            f.integer("controller_epoch"),
            recovery,
        )


# ------------------------------------------------------------------------------------------ topics


def uuid_to_kafka(value: uuid.UUID) -> str:
    """Kafka's `Uuid.toString`: the 16 bytes, base64url without padding (22 characters)."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


_KAFKA_UUID = re.compile(r"[A-Za-z0-9_-]{22}(==)?")


def uuid_from_kafka(text: str) -> uuid.UUID:
    """Kafka's `Uuid.fromString`; raises ZnodeFormatError unless `text` is base64url of 16 bytes."""
    if not _KAFKA_UUID.fullmatch(text):
        raise ZnodeFormatError(f"topic id {text[:40]!r} is not a base64url UUID")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text[:22] + "=="))


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """`/brokers/topics/<t>`: the topic's id and each partition's ordered replica list (the first
    replica is the preferred leader), plus the replicas a reassignment is adding and removing.

        {"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1]},"adding_replicas":{"0":[4]},
         "removing_replicas":{"0":[1]},"topic_id":"Sx3zfXdkRYS3hSGl4iRzyw"}

    Partitions with nothing being added or removed are left out of those maps, so empty lists are
    dropped here too; entries for partitions not in `partitions` are ignored when decoding, as Kafka
    does. The mappings are read-only and sorted by partition."""

    topic_id: uuid.UUID
    partitions: Mapping[int, tuple[int, ...]]
    adding: Mapping[int, tuple[int, ...]] = field(default_factory=lambda: MappingProxyType({}))
    removing: Mapping[int, tuple[int, ...]] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", _frozen_lists(self.partitions))
        for name in ("adding", "removing"):
            lists = {p: r for p, r in getattr(self, name).items() if r and p in self.partitions}
            object.__setattr__(self, name, _frozen_lists(lists))

    def replicas(self, partition: int) -> tuple[int, ...]:
        return self.partitions[partition]

    def encode(self) -> bytes:
        def lists(m: Mapping[int, tuple[int, ...]]) -> dict[str, list[int]]:
            return {str(p): list(r) for p, r in m.items()}

        return _encode(
            {
                "version": 3,
                "partitions": lists(self.partitions),
                "adding_replicas": lists(self.adding),
                "removing_replicas": lists(self.removing),
                "topic_id": uuid_to_kafka(self.topic_id),
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> TopicAssignment:
        what = "topic assignment"
        f = _Fields.load(what, data)
        topic_id = uuid_from_kafka(f.string("topic_id"))
        partitions = _replica_lists(what, "partitions", f.obj("partitions"))
        adding, removing = (
            _replica_lists(what, key, f.obj(key)) if f.has(key) else {}  # absent before version 2
            for key in ("adding_replicas", "removing_replicas")
        )
        return cls(topic_id, partitions, adding, removing)


_PARTITION_KEY = re.compile(r"[0-9]{1,10}")


def _replica_lists(what: str, key: str, value: dict[str, Any]) -> dict[int, tuple[int, ...]]:
    lists = _Fields(f"{what} {key}", value)
    out: dict[int, tuple[int, ...]] = {}
    for name in value:
        partition = int(name) if _PARTITION_KEY.fullmatch(name) else -1
        if not 0 <= partition <= INT32_MAX:
            raise ZnodeFormatError(f"{what}: {key} key {name[:20]!r} is not a partition number")
        out[partition] = lists.int_list(name)
    return out


# -------------------------------------------------------------------------------- producer id blocks

BLOCK_SIZE = 1000
"""Producer ids per block (Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE)."""


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """`/latest_producer_id_block`: the last block of producer ids handed out, [start, end] inclusive.

    {"version":1,"broker":2,"block_start":"1000","block_end":"1999"}"""

    broker_id: int
    start: int
    end: int

    def encode(self) -> bytes:
        return _encode(
            {
                "version": 1,
                "broker": self.broker_id,
                "block_start": str(self.start),
                "block_end": str(self.end),
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> ProducerIdBlock:
        what = "producer id block"
        f = _Fields.load(what, data)
        start = f.long_string("block_start", 0)
        end = f.long_string("block_end", 0)
        if end < start:
            raise ZnodeFormatError(f"{what}: block_end {end} is below block_start {start}")
        return cls(f.integer("broker"), start, end)


def next_block(current: ProducerIdBlock | None, broker_id: int) -> ProducerIdBlock:
    """The block to propose after `current` (from 0 when the znode is empty), as Kafka's
    ZkProducerIdManager does; written conditionally on the version `current` was read at."""
    if current is None:
        return ProducerIdBlock(broker_id, 0, BLOCK_SIZE - 1)
    if current.end > INT64_MAX - BLOCK_SIZE:
        raise ExactlyError("Have exhausted all producerIds.")
    return ProducerIdBlock(broker_id, current.end + 1, current.end + BLOCK_SIZE)


# ---------------------------------------------------------------------------------------- configs


@dataclass(frozen=True, slots=True)
class EntityConfig:
    """`/config/<type>/<name>`: an entity's config overrides, all values strings.

    {"version":1,"config":{"retention.ms":"1000"}}"""

    configs: Mapping[str, str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "configs", MappingProxyType(dict(self.configs)))

    def encode(self) -> bytes:
        return _encode({"version": 1, "config": dict(self.configs)})

    @classmethod
    def decode(cls, data: bytes) -> EntityConfig:
        return cls(_Fields.load("entity config", data).str_map("config"))


@dataclass(frozen=True, slots=True)
class ConfigChangeNotification:
    """`/config/changes/config_change_<n>`: which entity's config changed, e.g. "topics/t" or
    "users/alice/clients/c" (names sanitized). {"version":2,"entity_path":"topics/t"}"""

    entity_path: str

    def encode(self) -> bytes:
        return _encode({"version": 2, "entity_path": self.entity_path})

    @classmethod
    def decode(cls, data: bytes) -> ConfigChangeNotification:
        what = "config change notification"
        f = _Fields.load(what, data)
        if f.integer("version") != 2:
            raise ZnodeFormatError(f"{what}: only version 2 is supported")
        return cls(f.string("entity_path"))


# ---------------------------------------------------------------------------- admin trigger znodes


def encode_reassignment(reassignment: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
    """`/admin/reassign_partitions` (legacy, deprecated since Kafka 2.4):
    {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}"""
    partitions = [
        {"topic": t, "partition": p, "replicas": list(replicas)}
        for (t, p), replicas in sorted(reassignment.items())
    ]
    return _encode({"version": 1, "partitions": partitions})


def decode_reassignment(data: bytes) -> dict[tuple[str, int], tuple[int, ...]]:
    """A later entry for the same partition wins, as in Kafka's `toMap`."""
    f = _Fields.load("partition reassignment", data)
    return {
        (e.string("topic"), e.integer("partition")): e.int_list("replicas") for e in f.objects("partitions")
    }


def encode_preferred_election(partitions: Iterable[tuple[str, int]]) -> bytes:
    """`/admin/preferred_replica_election`: {"version":1,"partitions":[{"topic":"t","partition":0}]}"""
    listed = [{"topic": t, "partition": p} for t, p in sorted(set(partitions))]
    return _encode({"version": 1, "partitions": listed})


def decode_preferred_election(data: bytes) -> frozenset[tuple[str, int]]:
    f = _Fields.load("preferred replica election", data)
    return frozenset((e.string("topic"), e.integer("partition")) for e in f.objects("partitions"))
