"""The broker's hot-path counters: what a scrape cannot recompute from the broker's state.

Counted per request and per partition batch, never per record: a Produce adds each partition's record
count and byte size (known from the batch header the log already parsed), a Fetch each partition's
returned byte size, a request one count, its error codes and six timings.

* `TopicStats`: Kafka's BrokerTopicMetrics of one topic (MessagesIn, BytesIn, BytesOut,
  ReplicationBytesOut, Failed/TotalProduceRequests, Failed/TotalFetchRequests); `BrokerStats.topic`
  makes them on first use and `BrokerStats.all_topics` adds them up at read time.
* `RequestStats`: Kafka's RequestMetrics of one request type: requests by version, response error codes
  (every `error_code` in the response, NONE included, as Kafka's `errorCounts`), and the
  TotalTimeMs / RequestQueueTimeMs / LocalTimeMs / RemoteTimeMs / ResponseQueueTimeMs /
  ResponseSendTimeMs histograms.
* `RequestTiming`: one request's timestamps, filled in by the connection as the request moves:
  received (its frame decoded), started (its handler ran first), local (seconds its handler's steps
  took on the event loop), finished (response encoded), then sent (response handed to the socket).
  Queue = started - received; local; remote = finished - started - local (waiting for an fsync, the
  ISR, a long poll, a coordinator); response queue = sent - finished (waiting for earlier responses
  of the connection); total = sent - received.
* `ListenerStats`: connections accepted and closed on one listener (Kafka's socket-server-metrics
  connection-creation-total / connection-close-total; the open count is their difference).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from exactly.metrics.histogram import MS_BUCKETS, Histogram
from exactly.protocol.api import EncodedBody
from exactly.protocol.primitives import struct_lists

__all__ = [
    "FETCH_CONSUMER",
    "FETCH_FOLLOWER",
    "PSEUDO_REQUESTS",
    "BrokerStats",
    "ListenerStats",
    "RequestStats",
    "RequestTiming",
    "TopicStats",
    "error_codes",
]


class TopicStats:
    """Kafka's BrokerTopicMetrics of one topic (counts since the broker started)."""

    __slots__ = (
        "bytes_in",
        "bytes_out",
        "failed_fetch_requests",
        "failed_produce_requests",
        "messages_in",
        "replication_bytes_out",
        "total_fetch_requests",
        "total_produce_requests",
    )

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.replication_bytes_out = 0
        self.failed_produce_requests = 0
        self.total_produce_requests = 0
        self.failed_fetch_requests = 0
        self.total_fetch_requests = 0

    def appended(self, records: int, size: int) -> None:
        """A Produce's batch of `records` records, `size` bytes, appended to a partition of the topic."""
        self.messages_in += records
        self.bytes_in += size

    def produce_requests(self, partitions: int, failed: int) -> None:
        """A Produce's partitions of the topic, `failed` of them answered with an error (Kafka counts a
        partition of a Produce as one produce request)."""
        self.total_produce_requests += partitions
        self.failed_produce_requests += failed

    def fetched(self, size: int, *, replica: bool) -> None:
        """`size` record bytes of the topic returned by a Fetch (a follower's: `replica`)."""
        if replica:
            self.replication_bytes_out += size
        else:
            self.bytes_out += size

    def fetch_requests(self, partitions: int, failed: int) -> None:
        self.total_fetch_requests += partitions
        self.failed_fetch_requests += failed

    def values(self) -> tuple[int, ...]:
        """The counters, in `TopicStats.FIELDS` order."""
        return tuple(getattr(self, name) for name in TopicStats.FIELDS)

    FIELDS = (
        "messages_in",
        "bytes_in",
        "bytes_out",
        "replication_bytes_out",
        "failed_produce_requests",
        "total_produce_requests",
        "failed_fetch_requests",
        "total_fetch_requests",
    )


FETCH_CONSUMER = -1  # Kafka's pseudo request types: a Fetch's metrics also count under one of them
FETCH_FOLLOWER = -2
PSEUDO_REQUESTS = {FETCH_CONSUMER: "FetchConsumer", FETCH_FOLLOWER: "FetchFollower"}


class RequestTiming:
    """One request's timestamps (perf_counter seconds) and handler time, as the connection fills them in.
    `also`: the pseudo request type it is counted under too (a Fetch: FetchConsumer or FetchFollower)."""

    __slots__ = ("also", "api_key", "finished", "local", "received", "started")

    def __init__(self, api_key: int, received: float, also: int | None = None) -> None:
        self.api_key = api_key
        self.also = also
        self.received = received
        self.started = received
        self.local = 0.0
        self.finished = received


class RequestStats:
    """Kafka's RequestMetrics of one request type."""

    __slots__ = ("errors", "local", "queue", "remote", "requests", "response_queue", "response_send", "total")

    def __init__(self) -> None:
        self.requests: dict[int, int] = {}  # version -> count
        self.errors: dict[int, int] = {}  # error code -> count
        self.total = Histogram(MS_BUCKETS)
        self.queue = Histogram(MS_BUCKETS)
        self.local = Histogram(MS_BUCKETS)
        self.remote = Histogram(MS_BUCKETS)
        self.response_queue = Histogram(MS_BUCKETS)
        self.response_send = Histogram(MS_BUCKETS)

    def received(self, version: int) -> None:
        self.requests[version] = self.requests.get(version, 0) + 1

    def answered(self, response: Any) -> None:
        """Count every error code of the response (an acks=0 Produce has none)."""
        if response is None:
            return
        errors = self.errors
        for code in error_codes(response):
            errors[code] = errors.get(code, 0) + 1

    def completed(self, timing: RequestTiming, sent: float, send_done: float) -> None:
        """The response went to the socket at `sent` (its write finished at `send_done`)."""
        self.total.observe((send_done - timing.received) * 1000)
        self.queue.observe((timing.started - timing.received) * 1000)
        self.local.observe(timing.local * 1000)
        self.remote.observe(max(0.0, timing.finished - timing.started - timing.local) * 1000)
        self.response_queue.observe(max(0.0, sent - timing.finished) * 1000)
        self.response_send.observe((send_done - sent) * 1000)

    HISTOGRAMS = (
        ("total", "totaltimems"),
        ("queue", "requestqueuetimems"),
        ("local", "localtimems"),
        ("remote", "remotetimems"),
        ("response_queue", "responsequeuetimems"),
        ("response_send", "responsesendtimems"),
    )


class ListenerStats:
    """Connections of one listener since the broker started."""

    __slots__ = ("closed", "created")

    def __init__(self) -> None:
        self.created = 0
        self.closed = 0


class BrokerStats:
    """Every hot-path counter of one broker."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicStats] = {}
        # requests for topics that do not exist: in the all-topics sums only (a client naming random
        # topics must not make a series each)
        self.unknown_topics = TopicStats()
        self.requests: dict[int, RequestStats] = {}  # API key -> its stats
        self.listeners: dict[str, ListenerStats] = {}

    def topic(self, name: str, *, exists: bool = True) -> TopicStats:
        if not exists:
            return self.unknown_topics
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    def forget_topic(self, name: str) -> None:
        """A deleted topic's series go (Kafka removes its BrokerTopicMetrics too); its counts stay in the
        all-topics sums, which only ever grow."""
        stats = self.topics.pop(name, None)
        if stats is None:
            return
        gone = self.unknown_topics
        for field in TopicStats.FIELDS:
            setattr(gone, field, getattr(gone, field) + getattr(stats, field))

    def received(self, api_key: int, version: int, also: int | None) -> None:
        self.request(api_key).received(version)
        if also is not None:
            self.request(also).received(version)

    def answered(self, timing: RequestTiming, response: Any) -> None:
        self.request(timing.api_key).answered(response)
        if timing.also is not None:
            self.request(timing.also).answered(response)

    def completed(self, timing: RequestTiming, sent: float, send_done: float) -> None:
        self.request(timing.api_key).completed(timing, sent, send_done)
        if timing.also is not None:
            self.request(timing.also).completed(timing, sent, send_done)

    def request(self, api_key: int) -> RequestStats:
        stats = self.requests.get(api_key)
        if stats is None:
            stats = self.requests[api_key] = RequestStats()
        return stats

    def listener(self, name: str) -> ListenerStats:
        stats = self.listeners.get(name)
        if stats is None:
            stats = self.listeners[name] = ListenerStats()
        return stats

    def all_topics(self) -> tuple[int, ...]:
        """The sum over topics, in `TopicStats.FIELDS` order (Kafka's all-topics BrokerTopicMetrics)."""
        totals = [0] * len(TopicStats.FIELDS)
        for stats in (*self.topics.values(), self.unknown_topics):
            for i, value in enumerate(stats.values()):
                totals[i] += value
        return tuple(totals)


# --- the error codes of a response ------------------------------------------------------------------------

# per message class: (it has an `error_code` field, the names of its lists of structs)
_PLANS: dict[type, tuple[bool, tuple[str, ...]]] = {}


def _plan(cls: type) -> tuple[bool, tuple[str, ...]]:
    plan = _PLANS.get(cls)
    if plan is None:
        fields = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()
        plan = _PLANS[cls] = (any(f.name == "error_code" for f in fields), tuple(struct_lists(cls)))
    return plan


def error_codes(message: Any) -> list[int]:
    """Every `error_code` of a response and of the messages in its lists (topics, partitions, ...):
    a walk over the response's structure, one step per listed message, never into records."""
    if isinstance(message, EncodedBody):
        return list(message.error_codes)
    out: list[int] = []
    _collect(message, out)
    return out


def _collect(message: Any, out: list[int]) -> None:
    has_code, lists = _plan(type(message))
    if has_code:
        out.append(message.error_code)
    for name in lists:
        for item in getattr(message, name):
            _collect(item, out)
