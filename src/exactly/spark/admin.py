"""Driver-side lookups of the Spark source: which partitions it reads, and their offsets.

One confluent-kafka AdminClient per reader. Metadata comes from `list_topics` (a Metadata request that
never auto-creates a topic); offsets from `list_offsets` (ListOffsets): `earliest` is the log start
offset, `latest` under read_committed is the last stable offset (LSO) — below it every record is decided,
which is what makes a replayed micro-batch re-read exactly the same committed records. Every call is
bounded by the reader's `kafkaConsumer.pollTimeoutMs`; an unreachable broker is reported with the
address that was tried, and refused credentials (`kafka.sasl.*`) with the broker's reason.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from exactly.spark.offsets import PartitionOffsets, TopicPartition
from exactly.spark.options import ReaderOptions, SourceOptionError, SubscriptionKind

# a partition whose leadership is moving (a cluster's failover): ListOffsets and the reader's watermark
# lookups ask again until their timeout
LEADERSHIP_MOVING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.REPLICA_NOT_AVAILABLE,
    }
)
# ... and a leader that died (the client's own transport errors and timeouts)
LEADER_GONE = LEADERSHIP_MOVING | {
    KafkaError._DESTROY_BROKER,
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TIMED_OUT,
    KafkaError.REQUEST_TIMED_OUT,
}
RETRY_BACKOFF_S = 0.2
# one lookup's own timeout: librdkafka keeps a request for a dead leader until it times out, and a
# failover takes a ZooKeeper session (6 s) and an election; asking again reaches the new leader
ATTEMPT_S = 5.0


def attempt_timeout(deadline: float) -> float:
    """The timeout of one lookup attempt before `deadline` (monotonic): `ATTEMPT_S` at most, the time left
    otherwise, and never less than the back-off."""
    return min(max(deadline - time.monotonic(), RETRY_BACKOFF_S), ATTEMPT_S)


class BrokerUnreachableError(ConnectionError):
    """No broker answered at the bootstrap address within the timeout (one-line message)."""


class UnknownTopicError(SourceOptionError):
    """A topic the options name does not exist."""


# librdkafka's own log lines (connection refused, retries) go here instead of stderr: the errors that
# matter reach the caller as exceptions with one-line messages
_LIBRDKAFKA_LOG = logging.getLogger("exactly.spark.librdkafka")
_LIBRDKAFKA_LOG.propagate = False
_LIBRDKAFKA_LOG.addHandler(logging.NullHandler())


class SourceAdmin:
    """Metadata and offsets for one reader's options (driver only; not picklable, create per process)."""

    def __init__(self, options: ReaderOptions) -> None:
        self._options = options
        self._errors: list[KafkaError] = []  # librdkafka's error_cb: why no request got through
        config: dict[str, Any] = {
            **options.client_config(),
            "logger": _LIBRDKAFKA_LOG,
            "error_cb": self._errors.append,
        }
        try:
            self._admin = AdminClient(config)
        except KafkaException as exc:
            raise SourceOptionError(f"invalid kafka.* option: {exc.args[0].str()}") from None
        self._timeout = options.lookup_timeout_s

    def _unreachable(self, exc: KafkaException) -> BrokerUnreachableError:
        error: KafkaError = exc.args[0]
        self._admin.poll(0)  # serves error_cb
        refused = [e for e in self._errors if e.code() == KafkaError._AUTHENTICATION]
        if refused:
            return BrokerUnreachableError(
                f"the broker at kafka.bootstrap.servers={self._options.bootstrap_servers} refused the "
                f"client's credentials: {refused[-1].str()}"
            )
        return BrokerUnreachableError(
            f"cannot reach the broker at kafka.bootstrap.servers={self._options.bootstrap_servers} "
            f"within {self._timeout:g} s ({error.str()})"
        )

    def topic_partitions(self) -> dict[str, int]:
        """Every topic (not internal) -> its partition count."""
        try:
            metadata = self._admin.list_topics(timeout=self._timeout)
        except KafkaException as exc:
            raise self._unreachable(exc) from None
        return {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if topic.error is None and not name.startswith("__")
        }

    def subscribed_partitions(self, *, require_topics: bool = True) -> list[TopicPartition]:
        """The partitions the subscription reads now, sorted. With `require_topics`, a listed topic or an
        assigned partition that does not exist is an UnknownTopicError."""
        topics = self.topic_partitions()
        sub = self._options.subscription
        if sub.kind is SubscriptionKind.SUBSCRIBE_PATTERN:
            return sorted(TopicPartition(t, p) for t, n in topics.items() if sub.matches(t) for p in range(n))
        if sub.kind is SubscriptionKind.SUBSCRIBE:
            missing = [t for t in sub.topics if t not in topics]
            if missing and require_topics:
                raise UnknownTopicError(
                    f"unknown topic(s) {', '.join(missing)} at {self._options.bootstrap_servers} "
                    f"(subscribe={','.join(sub.topics)})"
                )
            return sorted(TopicPartition(t, p) for t in sub.topics if t in topics for p in range(topics[t]))
        missing_tps = [tp for tp in sub.assigned if tp.partition >= topics.get(tp.topic, 0)]
        if missing_tps and require_topics:
            raise UnknownTopicError(
                f"unknown topic partition(s) {', '.join(str(tp) for tp in missing_tps)} "
                f"at {self._options.bootstrap_servers} (assign)"
            )
        return sorted(tp for tp in sub.assigned if tp not in missing_tps)

    def _list_offsets(self, partitions: Iterable[TopicPartition], spec: OffsetSpec) -> PartitionOffsets:
        wanted = list(partitions)
        if not wanted:
            return {}
        isolation = (
            IsolationLevel.READ_COMMITTED
            if self._options.isolation_level == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED
        )
        request = {KafkaTopicPartition(tp.topic, tp.partition): spec for tp in wanted}
        deadline = time.monotonic() + self._timeout
        while True:
            # each attempt is bounded: a request sent to a leader that was just killed waits for its own
            # timeout, while asking again (after a metadata refresh) reaches the new one
            attempt = attempt_timeout(deadline)
            try:
                futures = self._admin.list_offsets(
                    request, isolation_level=isolation, request_timeout=attempt
                )
                found = {
                    TopicPartition(ktp.topic, ktp.partition): future.result(timeout=attempt + 1).offset
                    for ktp, future in futures.items()
                }
                if all(offset >= 0 for offset in found.values()):
                    return found
                # librdkafka 2.x answers a partition whose request went to a dead leader with offset
                # -1001 and no error, and keeps asking that leader until its metadata is refreshed
                error = KafkaError(KafkaError._TIMED_OUT, "no answer from the partition's leader")
            except (KafkaException, concurrent.futures.TimeoutError) as exc:
                error = (
                    exc.args[0]
                    if isinstance(exc, KafkaException)
                    else KafkaError(KafkaError._TIMED_OUT, f"no answer within {attempt + 1:g} s")
                )
            # a leadership moving or a leader gone (a broker killed or restarted): Kafka's consumer
            # refreshes its metadata and asks again
            if error.code() in LEADER_GONE and time.monotonic() < deadline:
                time.sleep(RETRY_BACKOFF_S)
                self._refresh_metadata({tp.topic for tp in wanted}, attempt)
                continue
            if error.code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN):
                raise self._unreachable(KafkaException(error))
            raise RuntimeError(f"ListOffsets failed for {', '.join(map(str, wanted))}: {error.str()}")

    def _refresh_metadata(self, topics: set[str], timeout: float) -> None:
        """A Metadata request for `topics`, which updates the leaders librdkafka's ListOffsets asks."""
        for topic in sorted(topics):
            with contextlib.suppress(KafkaException):
                self._admin.list_topics(topic, timeout=timeout)

    def earliest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        """Log start offsets."""
        return self._list_offsets(partitions, OffsetSpec.earliest())  # type: ignore[no-untyped-call]

    def latest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        """Last stable offsets under read_committed, high watermarks under read_uncommitted."""
        return self._list_offsets(partitions, OffsetSpec.latest())  # type: ignore[no-untyped-call]
