"""Options of the `exactly` PySpark data source's writer: parsing and validation (no network, no Spark).

Spark hands a data source its options as strings in a case-insensitive dict whose keys come out
lower-cased, so every name below is compared in lower case. Options named like Spark's Kafka sink:

- ``kafka.bootstrap.servers`` (required): ``host:port[,host:port...]``.
- ``kafka.<name>``: passed through to the confluent-kafka (librdkafka) producer as ``<name>``.
- ``topic``: the topic of every row; without it, each row needs a non-null ``topic`` column.
- ``guarantee``: ``exactly-once`` (default) or ``at-least-once``.
- ``checkpointLocation`` / ``queryName``: set by ``writeStream``; accepted, not used for data.
- ``exactly.test.*``: fault injection used only by the test suite.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from exactly.spark.options import SourceOptionError

BOOTSTRAP = "kafka.bootstrap.servers"
KAFKA_PREFIX = "kafka."
TEST_FAIL_TASK_ONCE = "exactly.test.failtaskonce"
TEST_HANG_AFTER_COMMIT = "exactly.test.hangaftercommit"
TEST_HANG_BEFORE_COMMIT = "exactly.test.hangbeforecommit"

# librdkafka settings that the writer owns: a user value would break the guarantee or the encoding.
_WRITER_OWNED = frozenset(
    {"transactional.id", "key.serializer", "value.serializer", "on_delivery", "error_cb", "logger"}
)
_WRITER_KNOWN = frozenset({BOOTSTRAP, "topic", "guarantee", "checkpointlocation", "queryname", "path"})
_TEST_OPTIONS = frozenset({TEST_FAIL_TASK_ONCE, TEST_HANG_AFTER_COMMIT, TEST_HANG_BEFORE_COMMIT})


# A writer option is missing, unknown or malformed (raised at planning, before data moves).
OptionsError = SourceOptionError


class Guarantee(enum.Enum):
    """Delivery guarantee of the writer."""

    EXACTLY_ONCE = "exactly-once"
    AT_LEAST_ONCE = "at-least-once"


class HangPoint(enum.Enum):
    """Test only: where the driver's commit of a batch stops (for a kill -9 of the driver there)."""

    BEFORE_DECISION = "before"  # the tasks' transactions are prepared, nothing decided
    AFTER_DECISION = "after"  # the broker decided; Spark has not written commits/N


@dataclass(frozen=True, slots=True)
class CommitHang:
    """Test only: at `point` of the commit of `batch_id`, create `marker_path` and sleep."""

    point: HangPoint
    batch_id: int
    marker_path: str


@dataclass(frozen=True, slots=True)
class WriterOptions:
    """The writer's parsed options. Picklable: Spark ships it to the executors inside the writer."""

    bootstrap_servers: str
    topic: str | None
    guarantee: Guarantee
    # librdkafka settings from ``kafka.*`` (minus bootstrap.servers), as the user spelled the values
    producer_config: tuple[tuple[str, str], ...]
    checkpoint_location: str | None = None  # writeStream's, to name the query when no message does
    fail_task_once: int | None = None
    commit_hang: CommitHang | None = None

    def client_config(self) -> dict[str, str]:
        """librdkafka settings every client of the writer starts from."""
        return {"bootstrap.servers": self.bootstrap_servers, **dict(self.producer_config)}


def _parse_int(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise OptionsError(f"option {name!r} must be an integer, got {text!r}") from None


def writer_options(options: Mapping[str, str]) -> WriterOptions:
    """Parse and validate the writer's options; raises `OptionsError` with every problem found."""
    lowered = {key.lower(): value for key, value in options.items()}
    problems: list[str] = []
    bootstrap = lowered.get(BOOTSTRAP, "").strip()
    if not bootstrap:
        problems.append(f"option {BOOTSTRAP!r} is required (e.g. 127.0.0.1:9092)")
    producer_config: list[tuple[str, str]] = []
    for key in sorted(lowered):
        if key in _WRITER_KNOWN or key in _TEST_OPTIONS:
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
    fail_task_once = None
    if TEST_FAIL_TASK_ONCE in lowered:
        fail_task_once = _parse_int(TEST_FAIL_TASK_ONCE, lowered[TEST_FAIL_TASK_ONCE])
    hang = None
    for name, point in (
        (TEST_HANG_BEFORE_COMMIT, HangPoint.BEFORE_DECISION),
        (TEST_HANG_AFTER_COMMIT, HangPoint.AFTER_DECISION),
    ):
        if name in lowered:
            batch, sep, path = lowered[name].partition(":")
            if not sep or not path:
                problems.append(f"option {name!r} must be '<batch id>:<marker file>'")
            else:
                hang = CommitHang(point, _parse_int(name, batch), path)
    if problems:
        raise OptionsError("exactly writer: " + "; ".join(problems))
    return WriterOptions(
        bootstrap_servers=bootstrap,
        topic=topic.strip() if topic is not None else None,
        guarantee=guarantee,
        producer_config=tuple(producer_config),
        checkpoint_location=lowered.get("checkpointlocation"),
        fail_task_once=fail_task_once,
        commit_hang=hang,
    )
