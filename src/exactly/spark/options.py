"""Options of the `exactly` Spark data source: parsing and validation of the reader's options
(the writer's are in `writer_options`) and the error type both use.

Spark hands a data source its options as strings in a case-insensitive map (keys arrive lower-cased).
Every check here is syntactic and runs before any client is created; what needs the broker (reachable,
topics exist) is in `exactly.spark.admin`. Errors are `SourceOptionError` with a one-line message.

`kafka.<name>` options pass through to the confluent-kafka (librdkafka) client as `<name>`, as in Spark's
Kafka source; librdkafka rejects names it does not know when the client is created.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from exactly.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetJsonError,
    PartitionOffsets,
    TopicPartition,
    parse_assignment_json,
    parse_offsets_json,
)

KAFKA_PREFIX = "kafka."
BOOTSTRAP = "kafka.bootstrap.servers"

# consumer settings the reader owns (Spark's Kafka source refuses the same ones)
_READER_OWNED_KAFKA = {
    "auto.offset.reset": "use startingOffsets",
    "enable.auto.commit": "the reader commits no offsets; Spark's checkpoint is the progress record",
    "enable.partition.eof": "the reader needs partition EOF events",
    "key.deserializer": "keys are always read as binary",
    "value.deserializer": "values are always read as binary",
    "interceptor.classes": "not supported",
}

_ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


class SourceOptionError(ValueError):
    """An option of the data source is missing, unknown or malformed (one-line message)."""


class SubscriptionKind(Enum):
    SUBSCRIBE = "subscribe"
    SUBSCRIBE_PATTERN = "subscribePattern"
    ASSIGN = "assign"


@dataclass(frozen=True, slots=True)
class Subscription:
    """Which partitions a reader reads: listed topics, topics matching a pattern, or fixed partitions."""

    kind: SubscriptionKind
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind is SubscriptionKind.SUBSCRIBE:
            return topic in self.topics
        if self.kind is SubscriptionKind.SUBSCRIBE_PATTERN:
            return not topic.startswith("__") and re.fullmatch(self.pattern, topic) is not None
        return any(tp.topic == topic for tp in self.assigned)

    def describe(self) -> str:
        if self.kind is SubscriptionKind.SUBSCRIBE:
            return f"subscribe={','.join(self.topics)}"
        if self.kind is SubscriptionKind.SUBSCRIBE_PATTERN:
            return f"subscribePattern={self.pattern}"
        return f"assign={','.join(str(tp) for tp in self.assigned)}"


class OffsetKind(Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    SPECIFIC = "specific"


@dataclass(frozen=True, slots=True)
class OffsetRequest:
    """`startingOffsets` / `endingOffsets`: earliest, latest, or per partition (-2 earliest, -1 latest)."""

    kind: OffsetKind
    specific: tuple[tuple[TopicPartition, int], ...] = ()

    def specific_offsets(self) -> PartitionOffsets:
        return dict(self.specific)


@dataclass(frozen=True, slots=True)
class ReaderOptions:
    bootstrap_servers: str
    subscription: Subscription
    starting_offsets: OffsetRequest | None  # None: the mode's default (batch earliest, streaming latest)
    ending_offsets: OffsetRequest  # batch only
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int
    isolation_level: str
    kafka_params: tuple[tuple[str, str], ...] = field(default=())

    def client_config(self) -> dict[str, str | int | bool]:
        """The confluent-kafka config of the reader's admin client and consumers (before our own settings)."""
        config: dict[str, str | int | bool] = dict(self.kafka_params)
        config["bootstrap.servers"] = self.bootstrap_servers
        return config

    def consumer_config(self) -> dict[str, str | int | bool]:
        config = self.client_config()
        config.setdefault("group.id", "exactly-spark-source")  # a label only: no group is joined
        # librdkafka stops fetching a partition whose local queue is full (64 MiB) for this long: 1 s by
        # default, and a task whose consumer waits on Spark (a batch being handed over) fills it, then
        # drains it in tens of milliseconds and starves for the rest of the second (5x slower reads)
        config.setdefault("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_MS)
        config.update(
            {
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
                "isolation.level": self.isolation_level,
            }
        )
        return config

    @property
    def lookup_timeout_s(self) -> float:
        return self.poll_timeout_ms / 1000


# lower-cased name -> the name users write (Spark lower-cases the keys it passes)
READER_OPTIONS = {
    name.lower(): name
    for name in (
        BOOTSTRAP,
        "subscribe",
        "subscribePattern",
        "assign",
        "startingOffsets",
        "endingOffsets",
        "maxOffsetsPerTrigger",
        "minPartitions",
        "includeHeaders",
        "failOnDataLoss",
        "kafkaConsumer.pollTimeoutMs",
        "kafka.isolation.level",
    )
}
DEFAULT_POLL_TIMEOUT_MS = 30_000
FETCH_QUEUE_BACKOFF_MS = 10


def _known_list(known: Mapping[str, str]) -> str:
    return ", ".join(sorted(known.values(), key=str.lower)) + ", kafka.*"


def _split(
    options: Mapping[str, str], known: Mapping[str, str], side: str
) -> tuple[dict[str, str], dict[str, str]]:
    """(our options by lower-cased name, kafka.* pass-through by librdkafka name); unknown names refused."""
    own: dict[str, str] = {}
    kafka: dict[str, str] = {}
    for key, value in options.items():
        lower = key.lower()
        if lower in known:
            own[lower] = value
        elif lower.startswith(KAFKA_PREFIX) and len(lower) > len(KAFKA_PREFIX):
            kafka[lower[len(KAFKA_PREFIX) :]] = value
        else:
            raise SourceOptionError(f"unknown {side} option {key!r}; known options: {_known_list(known)}")
    bootstrap = own.get(BOOTSTRAP, "").strip()
    if not bootstrap:
        raise SourceOptionError(f"option {BOOTSTRAP!r} is required (host:port[,host:port...])")
    own[BOOTSTRAP] = bootstrap
    return own, kafka


def _bool(own: Mapping[str, str], name: str, default: bool) -> bool:
    raw = own.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise SourceOptionError(f"option {name!r} must be true or false, got {raw!r}")


def _positive_int(own: Mapping[str, str], name: str) -> int | None:
    raw = own.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise SourceOptionError(f"option {name!r} must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise SourceOptionError(f"option {name!r} must be a positive integer, got {raw!r}")
    return value


def _offset_request(
    own: Mapping[str, str], name: str, *, allow_earliest: bool = True
) -> OffsetRequest | None:
    raw = own.get(name.lower())
    if raw is None:
        return None
    text = raw.strip()
    if text.lower() == "earliest":
        if not allow_earliest:
            raise SourceOptionError(
                f"option {name!r} cannot be 'earliest' (a batch query would read nothing)"
            )
        return OffsetRequest(OffsetKind.EARLIEST)
    if text.lower() == "latest":
        return OffsetRequest(OffsetKind.LATEST)
    if not text.startswith("{"):
        raise SourceOptionError(
            f'option {name!r} must be \'earliest\', \'latest\' or JSON like {{"topic":{{"0":23,"1":-2}}}}, '
            f"got {raw!r}"
        )
    try:
        offsets = parse_offsets_json(text, option=name)
    except OffsetJsonError as exc:
        raise SourceOptionError(str(exc)) from None
    if not allow_earliest and EARLIEST in offsets.values():
        raise SourceOptionError(f"option {name!r}: -2 (earliest) is not allowed for an ending offset")
    return OffsetRequest(OffsetKind.SPECIFIC, tuple(sorted(offsets.items())))


def _subscription(own: Mapping[str, str]) -> Subscription:
    given = [name for name in ("subscribe", "subscribePattern", "assign") if name.lower() in own]
    if len(given) != 1:
        which = ", ".join(given) if given else "none"
        raise SourceOptionError(
            f"exactly one of 'subscribe', 'subscribePattern', 'assign' is required (given: {which})"
        )
    name = given[0]
    raw = own[name.lower()].strip()
    if name == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise SourceOptionError(f"option 'subscribe' must list topics separated by commas, got {raw!r}")
        return Subscription(SubscriptionKind.SUBSCRIBE, topics=tuple(sorted(set(topics))))
    if name == "subscribePattern":
        try:
            re.compile(raw)
        except re.error as exc:
            raise SourceOptionError(
                f"option 'subscribePattern' is not a valid regular expression: {exc}"
            ) from None
        if not raw:
            raise SourceOptionError("option 'subscribePattern' must not be empty")
        return Subscription(SubscriptionKind.SUBSCRIBE_PATTERN, pattern=raw)
    try:
        assigned = parse_assignment_json(raw)
    except OffsetJsonError as exc:
        raise SourceOptionError(str(exc)) from None
    return Subscription(SubscriptionKind.ASSIGN, assigned=assigned)


def parse_reader_options(options: Mapping[str, str]) -> ReaderOptions:
    own, kafka = _split(options, READER_OPTIONS, "reader")
    for name, reason in _READER_OWNED_KAFKA.items():
        if name in kafka:
            raise SourceOptionError(f"option 'kafka.{name}' is not supported: {reason}")
    kafka.pop("bootstrap.servers", None)
    isolation = own.get("kafka.isolation.level", "read_committed").strip().lower()
    if isolation not in _ISOLATION_LEVELS:
        raise SourceOptionError(
            f"option 'kafka.isolation.level' must be one of {', '.join(_ISOLATION_LEVELS)}"
        )
    subscription = _subscription(own)
    starting = _offset_request(own, "startingOffsets")
    ending = _offset_request(own, "endingOffsets", allow_earliest=False) or OffsetRequest(OffsetKind.LATEST)
    for request, name in ((starting, "startingOffsets"), (ending, "endingOffsets")):
        if request is None or request.kind is not OffsetKind.SPECIFIC:
            continue
        for tp, _ in request.specific:
            if not subscription.matches(tp.topic):
                raise SourceOptionError(
                    f"option {name!r} names {tp.topic!r}, which {subscription.describe()} does not read"
                )
            if subscription.kind is SubscriptionKind.ASSIGN and tp not in subscription.assigned:
                raise SourceOptionError(f"option {name!r} names partition {tp}, which is not in 'assign'")
    return ReaderOptions(
        bootstrap_servers=own[BOOTSTRAP],
        subscription=subscription,
        starting_offsets=starting,
        ending_offsets=ending,
        max_offsets_per_trigger=_positive_int(own, "maxOffsetsPerTrigger"),
        min_partitions=_positive_int(own, "minPartitions"),
        include_headers=_bool(own, "includeHeaders", False),
        fail_on_data_loss=_bool(own, "failOnDataLoss", True),
        poll_timeout_ms=_positive_int(own, "kafkaConsumer.pollTimeoutMs") or DEFAULT_POLL_TIMEOUT_MS,
        isolation_level=isolation,
        kafka_params=tuple(sorted(kafka.items())),
    )


__all__ = [
    "BOOTSTRAP",
    "EARLIEST",
    "LATEST",
    "OffsetKind",
    "OffsetRequest",
    "ReaderOptions",
    "SourceOptionError",
    "Subscription",
    "SubscriptionKind",
    "parse_reader_options",
]
