"""Options of the `exactly` PySpark data source's writer: parsing and validation (no network, no Spark).

Spark hands a data source its options as strings in a case-insensitive dict whose keys come out
lower-cased, so every name below is compared in lower case. Options named like Spark's Kafka sink:

- ``kafka.bootstrap.servers`` (required): ``host:port[,host:port...]``.
- ``kafka.<name>``: passed through to the confluent-kafka (librdkafka) producer as ``<name>``.
- ``topic``: the topic of every row; without it, each row needs a non-null ``topic`` column.
- ``guarantee``: ``exactly-once`` (default) or ``at-least-once``.
- ``checkpointLocation`` / ``queryName``: set by ``writeStream``; accepted, not used for data.
- ``exactly.writer.hooks`` / ``exactly.writer.hooks.argument``: a `WriterHooks` class (``module:Class``)
  called at the writer's steps, and its argument (fault injection for tests: `exactly.spark.writer_hooks`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from exactly.spark.options import SourceOptionError
from exactly.spark.writer_hooks import HOOKS, HOOKS_ARGUMENT, HooksSpec

BOOTSTRAP = "kafka.bootstrap.servers"
KAFKA_PREFIX = "kafka."

# librdkafka settings that the writer owns: a user value would break the guarantee or the encoding.
_WRITER_OWNED = frozenset(
    {"transactional.id", "key.serializer", "value.serializer", "on_delivery", "error_cb", "logger"}
)
_WRITER_KNOWN = frozenset(
    {BOOTSTRAP, "topic", "guarantee", "checkpointlocation", "queryname", "path", HOOKS, HOOKS_ARGUMENT}
)


# A writer option is missing, unknown or malformed (raised at planning, before data moves).
OptionsError = SourceOptionError


class Guarantee(enum.Enum):
    """Delivery guarantee of the writer."""

    EXACTLY_ONCE = "exactly-once"
    AT_LEAST_ONCE = "at-least-once"


@dataclass(frozen=True, slots=True)
class WriterOptions:
    """The writer's parsed options. Picklable: Spark ships it to the executors inside the writer."""

    bootstrap_servers: str
    topic: str | None
    guarantee: Guarantee
    # librdkafka settings from ``kafka.*`` (minus bootstrap.servers), as the user spelled the values
    producer_config: tuple[tuple[str, str], ...]
    checkpoint_location: str | None = None  # writeStream's, to name the query when no message does
    hooks: HooksSpec | None = None  # None: the writer's steps call no hooks

    def client_config(self) -> dict[str, str]:
        """librdkafka settings every client of the writer starts from."""
        return {"bootstrap.servers": self.bootstrap_servers, **dict(self.producer_config)}


def writer_options(options: Mapping[str, str]) -> WriterOptions:
    """Parse and validate the writer's options; raises `OptionsError` with every problem found."""
    lowered = {key.lower(): value for key, value in options.items()}
    problems: list[str] = []
    bootstrap = lowered.get(BOOTSTRAP, "").strip()
    if not bootstrap:
        problems.append(f"option {BOOTSTRAP!r} is required (e.g. 127.0.0.1:9092)")
    producer_config: list[tuple[str, str]] = []
    for key in sorted(lowered):
        if key in _WRITER_KNOWN:
            continue
        if key.startswith(KAFKA_PREFIX):
            setting = key[len(KAFKA_PREFIX) :]
            if setting in _WRITER_OWNED:
                problems.append(f"option {key!r} is set by the writer itself and cannot be given")
            else:
                producer_config.append((setting, lowered[key]))
            continue
        problems.append(
            f"unknown option {key!r} (writer options: {BOOTSTRAP}, topic, guarantee, kafka.* settings)"
        )
    topic = lowered.get("topic")
    if topic is not None and not topic.strip():
        problems.append("option 'topic' is empty")
    guarantee_text = lowered.get("guarantee", Guarantee.EXACTLY_ONCE.value).strip().lower()
    try:
        guarantee = Guarantee(guarantee_text)
    except ValueError:
        problems.append(
            f"option 'guarantee' must be 'exactly-once' or 'at-least-once', got {guarantee_text!r}"
        )
        guarantee = Guarantee.EXACTLY_ONCE
    hooks = None
    if HOOKS in lowered:
        hooks = HooksSpec(lowered[HOOKS].strip(), lowered.get(HOOKS_ARGUMENT))
        try:
            hooks.load()  # on the driver, at planning: a bad name or argument fails before data moves
        except ValueError as e:
            problems.append(f"option {HOOKS!r}: {e}")
    elif HOOKS_ARGUMENT in lowered:
        problems.append(f"option {HOOKS_ARGUMENT!r} is given without {HOOKS!r}")
    if problems:
        raise OptionsError("exactly writer: " + "; ".join(problems))
    return WriterOptions(
        bootstrap_servers=bootstrap,
        topic=topic.strip() if topic is not None else None,
        guarantee=guarantee,
        producer_config=tuple(producer_config),
        checkpoint_location=lowered.get("checkpointlocation"),
        hooks=hooks,
    )
