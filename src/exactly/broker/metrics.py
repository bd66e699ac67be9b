"""The broker's Prometheus metrics: what a scrape of `/metrics` returns, and the readiness `/readyz` reports.

Named as the Prometheus JMX exporter's usual Kafka rules name Kafka's MBeans (lower-case, `PerSec`
meters as `_total` counters), so dashboards and alerts written for Kafka work:
`kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=t` is
`kafka_server_brokertopicmetrics_messagesin_total{topic="t"}` (and without `topic`, the all-topics
meter), `kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=9` is
`kafka_network_requestmetrics_requests_total{request="Produce",version="9"}`, Kafka's TotalTimeMs
histogram a Prometheus histogram `kafka_network_requestmetrics_totaltimems{request=...}` in ms. Where
Kafka has no MBean, the name starts with `exactly_`. docs/metrics.md lists every metric with its MBean.

Two kinds of values, read differently:

* State (sizes, offsets, counts, ages) is not kept anywhere for metrics: `BrokerCollector.snapshot()`
  reads it from the broker's sans-IO objects when a scrape comes (log end offsets, the ISR of each
  partition, the transaction coordinator's ids, the groups). Nothing is done per append for it.
* Events (requests, produced batches, ISR changes, fsyncs, commits) are plain integers and fixed-bucket
  histograms kept by the code that does the work (`exactly.metrics`, `ReplicaManager.isr_shrinks`,
  `TransactionService.commits`, `storage.files.FSYNC_SECONDS`, ...), read by the same snapshot.

A scrape is two steps so that the event loop is never held for long: `snapshot()` runs on the event
loop (it must: the state it reads is the loop's) and only copies numbers into `Family` values (about
a microsecond per series); `render(families)` turns them into prometheus_client metric families and
the text exposition format (`generate_latest`), the expensive part, in a thread (exactly.broker.
metrics_http). `BrokerCollector` is also a prometheus_client collector (`collect()` does both steps at
once) for a `CollectorRegistry`.

Cardinality: per-partition series (`kafka_log_log_*`, `exactly_log_lso_lag`) only with
`metrics.per.partition.enable=true` (the default), and only for loaded partitions; per-topic series for
topics that were produced to or fetched from since start; per-request series for request types seen.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.samples import Sample

from exactly.errors import ErrorCode
from exactly.metrics.histogram import SECONDS_BUCKETS, Histogram
from exactly.metrics.stats import PSEUDO_REQUESTS, RequestStats, TopicStats
from exactly.protocol.messages import ApiKey
from exactly.storage import files
from exactly.storage.file_handles import HANDLES
from exactly.txn.state import TxnState

if TYPE_CHECKING:
    from exactly.broker.server import Broker

__all__ = [
    "BrokerCollector",
    "Family",
    "Kind",
    "LoopLag",
    "Readiness",
    "readiness",
    "render",
]

Labels = tuple[str, ...]


class Kind(Enum):
    GAUGE = "gauge"
    COUNTER = "counter"
    HISTOGRAM = "histogram"


@dataclass(frozen=True, slots=True)
class Family:
    """One metric's values at a scrape. `samples` (gauges and counters): label values in `labels` order
    and the value; a sample with fewer label values than `labels` has only the first ones (Kafka's
    all-topics meter is the topic meter without `topic`). `buckets` (histograms): label values, the
    cumulative (upper bound, count) buckets with +Inf last, and the sum."""

    name: str
    doc: str
    kind: Kind
    labels: Labels = ()
    samples: Sequence[tuple[Labels, float]] = ()
    buckets: Sequence[tuple[Labels, Sequence[tuple[float, int]], float]] = ()


_OPEN_STATES = frozenset(
    {TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE}
)
_TOPIC_METRICS = {  # TopicStats field -> (BrokerTopicMetrics meter, what it counts)
    "messages_in": ("messagesin", "Records appended by Produce requests (MessagesInPerSec)."),
    "bytes_in": ("bytesin", "Bytes of record batches appended by Produce requests (BytesInPerSec)."),
    "bytes_out": ("bytesout", "Record bytes returned to consumers' Fetch requests (BytesOutPerSec)."),
    "replication_bytes_out": (
        "replicationbytesout",
        "Record bytes returned to followers' Fetch requests (ReplicationBytesOutPerSec).",
    ),
    "failed_produce_requests": (
        "failedproducerequests",
        "Partitions of Produce requests answered with an error (FailedProduceRequestsPerSec).",
    ),
    "total_produce_requests": (
        "totalproducerequests",
        "Partitions of Produce requests (TotalProduceRequestsPerSec).",
    ),
    "failed_fetch_requests": (
        "failedfetchrequests",
        "Partitions of Fetch requests answered with an error (FailedFetchRequestsPerSec).",
    ),
    "total_fetch_requests": (
        "totalfetchrequests",
        "Partitions of Fetch requests (TotalFetchRequestsPerSec).",
    ),
}
_REQUEST_TIMES = {
    "totaltimems": "From the request read to its response written (TotalTimeMs), ms.",
    "requestqueuetimems": "From the request read to its handler started (RequestQueueTimeMs), ms.",
    "localtimems": "The handler's own work on the event loop (LocalTimeMs), ms.",
    "remotetimems": "The handler waiting: fsync, the ISR, a long poll, a coordinator (RemoteTimeMs), ms.",
    "responsequeuetimems": "Waiting for the connection's earlier responses (ResponseQueueTimeMs), ms.",
    "responsesendtimems": "Handing the response to the socket (ResponseSendTimeMs), ms.",
}


def _api_name(key: int) -> str:
    """Kafka's request name (`Produce`, `ApiVersions`, ...), as RequestMetrics' `request` label."""
    try:
        return "".join(part.capitalize() for part in ApiKey(key).name.split("_"))
    except ValueError:
        return str(key)


_API_NAMES = {**{int(key): _api_name(int(key)) for key in ApiKey}, **PSEUDO_REQUESTS}


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def _histogram(histogram: Histogram) -> tuple[list[tuple[float, int]], float]:
    return histogram.cumulative(), histogram.sum


class BrokerCollector(Collector):
    """Reads a broker's state and counters at scrape time (`snapshot`, on the event loop)."""

    def __init__(self, broker: Broker, loop_lag: LoopLag | None = None) -> None:
        self.broker = broker
        self.loop_lag = loop_lag

    def collect(self) -> Iterator[Metric]:
        return iter(metric_families(self.snapshot()))

    def snapshot(self) -> list[Family]:
        """Every metric's values now; call on the broker's event loop."""
        now_ms = self.broker.clock.milliseconds()
        out: list[Family] = []
        out += self._topic_families()
        out += self._request_families()
        out += self._network_families()
        out += self._partition_families(now_ms)
        out += self._transaction_families(now_ms)
        out += self._group_families()
        out += self._storage_families()
        out += self._loop_families()
        return out

    # --- BrokerTopicMetrics ------------------------------------------------------------------------------

    def _topic_families(self) -> list[Family]:
        stats = self.broker.stats
        if stats is None:
            return []
        existing = self.broker.metadata.topics
        for topic in [t for t in stats.topics if t not in existing]:
            stats.forget_topic(topic)  # deleted: its series go, its counts stay in the sums
        per_topic = [(topic, s.values()) for topic, s in sorted(stats.topics.items())]
        totals = stats.all_topics()
        out = []
        for i, field in enumerate(TopicStats.FIELDS):
            meter, doc = _TOPIC_METRICS[field]
            samples: list[tuple[Labels, float]] = [((), totals[i])]
            samples += [((topic,), values[i]) for topic, values in per_topic]
            out.append(
                Family(f"kafka_server_brokertopicmetrics_{meter}", doc, Kind.COUNTER, ("topic",), samples)
            )
        return out

    # --- RequestMetrics ----------------------------------------------------------------------------------

    def _request_families(self) -> list[Family]:
        stats = self.broker.stats
        if stats is None:
            return []
        requests: list[tuple[str, RequestStats]] = sorted(
            (_API_NAMES.get(key) or _api_name(key), s) for key, s in stats.requests.items()
        )
        out = [
            Family(
                "kafka_network_requestmetrics_requests",
                "Requests received, by type and version (RequestsPerSec).",
                Kind.COUNTER,
                ("request", "version"),
                [((name, str(v)), n) for name, s in requests for v, n in sorted(dict(s.requests).items())],
            ),
            Family(
                "kafka_network_requestmetrics_errors",
                "Error codes in responses, NONE included, by request type (ErrorsPerSec).",
                Kind.COUNTER,
                ("request", "error"),
                [
                    ((name, _error_name(c)), n)
                    for name, s in requests
                    for c, n in sorted(dict(s.errors).items())
                ],
            ),
        ]
        for field, metric in RequestStats.HISTOGRAMS:
            buckets = []
            for name, s in requests:
                cumulative, total = _histogram(getattr(s, field))
                buckets.append(((name,), cumulative, total))
            out.append(
                Family(
                    f"kafka_network_requestmetrics_{metric}",
                    _REQUEST_TIMES[metric],
                    Kind.HISTOGRAM,
                    ("request",),
                    buckets=buckets,
                )
            )
        return out

    # --- the network layer -------------------------------------------------------------------------------

    def _network_families(self) -> list[Family]:
        stats = self.broker.stats
        if stats is None:
            return []
        listeners = sorted((name, s.created, s.closed) for name, s in stats.listeners.items())
        prefix = "kafka_server_socket_server_metrics_connection"
        return [
            Family(
                f"{prefix}_count",
                "Open client connections, by listener (connection-count).",
                Kind.GAUGE,
                ("listener",),
                [((name,), created - closed) for name, created, closed in listeners],
            ),
            Family(
                f"{prefix}_creation",
                "Connections accepted, by listener (connection-creation-total).",
                Kind.COUNTER,
                ("listener",),
                [((name,), created) for name, created, _ in listeners],
            ),
            Family(
                f"{prefix}_close",
                "Connections closed, by listener (connection-close-total).",
                Kind.COUNTER,
                ("listener",),
                [((name,), closed) for name, _, closed in listeners],
            ),
        ]

    # --- ReplicaManager and Log ----------------------------------------------------------------------------

    def _partition_families(self, now_ms: int) -> list[Family]:
        broker = self.broker
        replicas = broker.replicas
        logs = replicas.logs
        per_partition = broker.config.metrics_per_partition
        loaded = list(logs.logs())
        pending = logs.pending
        all_partitions = len(logs.partitions())
        by_key = {(p.topic, p.index): p for p in replicas.partitions()}
        cluster = replicas.cluster
        max_timeout_ms = broker.config.transaction_max_timeout_ms
        leaders = under_replicated = under_min_isr = at_min_isr = hanging = 0
        lso_lag_max = 0
        sizes: list[tuple[Labels, float]] = []
        ends: list[tuple[Labels, float]] = []
        starts: list[tuple[Labels, float]] = []
        lags: list[tuple[Labels, float]] = []
        for (topic, index), log in loaded:
            partition = by_key.get((topic, index))
            if partition is None:
                leads = not cluster
            else:
                leads = partition.is_leader
                if leads:
                    isr = len(partition.isr)
                    if isr < len(partition.replicas):
                        under_replicated += 1
                    minimum = partition.min_insync_replicas
                    if isr < minimum:
                        under_min_isr += 1
                    elif isr == minimum:
                        at_min_isr += 1
            leaders += leads
            high_watermark = log.high_watermark
            lag = 0
            producer_state = log.producer_state
            if producer_state.first_unstable_offset is not None:
                lag = high_watermark - log.last_stable_offset
                lso_lag_max = max(lso_lag_max, lag)
                for txn in producer_state.ongoing_transactions():
                    entry = producer_state.last_entry(txn.producer_id)
                    if entry is not None and 0 <= entry.last_timestamp < now_ms - max_timeout_ms:
                        hanging += 1
            if per_partition:
                labels = (topic, str(index))
                sizes.append((labels, log.size_in_bytes))
                ends.append((labels, log.log_end_offset))
                starts.append((labels, log.log_start_offset))
                lags.append((labels, lag))
        offline = max(0, all_partitions - len(loaded) - pending)
        if not cluster:
            leaders = len(loaded) + pending
        rm = "kafka_server_replicamanager"
        out = [
            Family(
                f"{rm}_partitioncount",
                "Partitions with a replica on this broker (PartitionCount).",
                Kind.GAUGE,
                samples=[((), all_partitions)],
            ),
            Family(
                f"{rm}_leadercount",
                "Partitions this broker leads (LeaderCount).",
                Kind.GAUGE,
                samples=[((), leaders)],
            ),
            Family(
                f"{rm}_underreplicatedpartitions",
                "Led partitions whose ISR is smaller than their replica set (UnderReplicatedPartitions).",
                Kind.GAUGE,
                samples=[((), under_replicated)],
            ),
            Family(
                f"{rm}_underminisrpartitioncount",
                "Led partitions whose ISR is below min.insync.replicas (UnderMinIsrPartitionCount).",
                Kind.GAUGE,
                samples=[((), under_min_isr)],
            ),
            Family(
                f"{rm}_atminisrpartitioncount",
                "Led partitions whose ISR is exactly min.insync.replicas (AtMinIsrPartitionCount).",
                Kind.GAUGE,
                samples=[((), at_min_isr)],
            ),
            Family(
                f"{rm}_offlinereplicacount",
                "Partitions whose log cannot be served (OfflineReplicaCount).",
                Kind.GAUGE,
                samples=[((), offline)],
            ),
            Family(
                f"{rm}_isrshrinks",
                "ISR shrinks of led partitions (IsrShrinksPerSec).",
                Kind.COUNTER,
                samples=[((), replicas.isr_shrinks)],
            ),
            Family(
                f"{rm}_isrexpands",
                "ISR expansions of led partitions (IsrExpandsPerSec).",
                Kind.COUNTER,
                samples=[((), replicas.isr_expands)],
            ),
            Family(
                "exactly_log_partitions_loading",
                "Partitions found at start-up and not loaded yet (they load in the background).",
                Kind.GAUGE,
                samples=[((), pending)],
            ),
            Family(
                "exactly_log_lso_lag_max",
                "The largest high watermark - last stable offset of any partition (open transactions).",
                Kind.GAUGE,
                samples=[((), lso_lag_max)],
            ),
            Family(
                "exactly_log_hanging_transactions",
                "Open transactions in partition logs whose producer last wrote more than "
                "transaction.max.timeout.ms ago (kafka-transactions find-hanging's test).",
                Kind.GAUGE,
                samples=[((), hanging)],
            ),
        ]
        if per_partition:
            tp = ("topic", "partition")
            out += [
                Family(
                    "kafka_log_log_size",
                    "Bytes of the partition's segment files (Log Size).",
                    Kind.GAUGE,
                    tp,
                    sizes,
                ),
                Family(
                    "kafka_log_log_logendoffset",
                    "The partition's log end offset (Log LogEndOffset).",
                    Kind.GAUGE,
                    tp,
                    ends,
                ),
                Family(
                    "kafka_log_log_logstartoffset",
                    "The partition's log start offset (Log LogStartOffset).",
                    Kind.GAUGE,
                    tp,
                    starts,
                ),
                Family(
                    "exactly_log_lso_lag",
                    "High watermark - last stable offset: records read_committed consumers cannot see "
                    "yet because a transaction is open.",
                    Kind.GAUGE,
                    tp,
                    lags,
                ),
            ]
        return out

    # --- the transaction coordinator -----------------------------------------------------------------------

    def _transaction_families(self, now_ms: int) -> list[Family]:
        service = self.broker.transactions
        coordinator = service.coordinator
        by_state: dict[str, int] = {}
        ongoing = prepared = 0
        oldest_open = oldest_prepared = 0.0
        for txn in coordinator.transactions.values():
            state = txn.state
            name = state.kafka_name
            by_state[name] = by_state.get(name, 0) + 1
            if state is TxnState.ONGOING:
                ongoing += 1
            if state in _OPEN_STATES and txn.start_timestamp >= 0:
                oldest_open = max(oldest_open, (now_ms - txn.start_timestamp) / 1000)
            if state is TxnState.PREPARED:
                prepared += 1
                if txn.prepared is not None:
                    oldest_prepared = max(
                        oldest_prepared, (now_ms - txn.prepared.prepared_timestamp_ms) / 1000
                    )
        runtime = service.runtime
        etc = "exactly_transaction_coordinator"
        tcm = "kafka_server_transaction_coordinator_metrics"
        return [
            Family(
                f"{tcm}_partition_load_time_max",
                "The longest load of a __transaction_state partition, ms (partition-load-time-max).",
                Kind.GAUGE,
                samples=[((), runtime.load_seconds_max * 1000)],
            ),
            Family(
                f"{tcm}_partition_load_time_avg",
                "The mean load of a __transaction_state partition, ms (partition-load-time-avg).",
                Kind.GAUGE,
                samples=[((), runtime.load_seconds_total * 1000 / max(1, runtime.loads))],
            ),
            Family(
                f"{etc}_transactions",
                "Transactional ids this broker coordinates, by state.",
                Kind.GAUGE,
                ("state",),
                sorted(((name,), n) for name, n in by_state.items()),
            ),
            Family(
                f"{etc}_ongoing_transactions",
                "Transactions begun and not ended (state Ongoing).",
                Kind.GAUGE,
                samples=[((), ongoing)],
            ),
            Family(
                f"{etc}_oldest_open_transaction_age_seconds",
                "Age of the oldest transaction not yet complete (Ongoing or PrepareCommit/Abort); 0: none.",
                Kind.GAUGE,
                samples=[((), oldest_open)],
            ),
            Family(
                f"{etc}_prepared_transactions",
                "Two-phase transactions prepared and not decided yet.",
                Kind.GAUGE,
                samples=[((), prepared)],
            ),
            Family(
                f"{etc}_oldest_prepared_transaction_age_seconds",
                "Age of the oldest prepared two-phase transaction; 0: none.",
                Kind.GAUGE,
                samples=[((), oldest_prepared)],
            ),
            Family(
                f"{etc}_commits",
                "Transactions committed (every marker written).",
                Kind.COUNTER,
                samples=[((), service.commits)],
            ),
            Family(
                f"{etc}_aborts",
                "Transactions aborted (every marker written).",
                Kind.COUNTER,
                samples=[((), service.aborts)],
            ),
            Family(
                "exactly_transaction_markers_written",
                "COMMIT/ABORT markers appended to partitions this broker leads.",
                Kind.COUNTER,
                samples=[((), service.markers_written)],
            ),
        ]

    # --- the group coordinator ---------------------------------------------------------------------------

    def _group_families(self) -> list[Family]:
        service = self.broker.groups
        coordinator = service.coordinator
        by_state: dict[str, int] = {}
        by_state_protocol: dict[tuple[str, str], int] = {}
        for group in coordinator.groups.values():
            state = group.state.value
            by_state[state] = by_state.get(state, 0) + 1
            key = (state, group.protocol_type or "")
            by_state_protocol[key] = by_state_protocol.get(key, 0) + 1
        runtime = service.runtime
        gmm = "kafka_coordinator_group_groupmetadatamanager"
        gcm = "kafka_server_group_coordinator_metrics"
        states = [
            ("numgroupsstable", "Stable"),
            ("numgroupspreparingrebalance", "PreparingRebalance"),
            ("numgroupscompletingrebalance", "CompletingRebalance"),
            ("numgroupsempty", "Empty"),
            ("numgroupsdead", "Dead"),
        ]
        out = [
            Family(
                f"{gmm}_numgroups",
                "Groups this broker coordinates (NumGroups).",
                Kind.GAUGE,
                samples=[((), len(coordinator.groups))],
            ),
            *(
                Family(
                    f"{gmm}_{metric}",
                    f"Groups in state {state} ({metric}).",
                    Kind.GAUGE,
                    samples=[((), by_state.get(state, 0))],
                )
                for metric, state in states
            ),
            Family(
                f"{gmm}_numoffsets",
                "Committed offsets held (NumOffsets).",
                Kind.GAUGE,
                samples=[((), coordinator.offsets.offset_count())],
            ),
            Family(
                f"{gcm}_group_count",
                "Groups by group protocol (group-count); exactly has classic groups.",
                Kind.GAUGE,
                ("protocol",),
                [(("classic",), len(coordinator.groups))],
            ),
            Family(
                "exactly_group_coordinator_groups",
                "Groups by state and protocol type (consumer, connect, ...; empty: none chosen yet).",
                Kind.GAUGE,
                ("state", "protocol_type"),
                sorted((key, n) for key, n in by_state_protocol.items()),
            ),
            Family(
                f"{gcm}_group_completed_rebalance",
                "Generations formed (group-completed-rebalance-count).",
                Kind.COUNTER,
                samples=[((), coordinator.classic.rebalance.completed_rebalances)],
            ),
            Family(
                f"{gcm}_offset_commit",
                "Offsets committed, transactional ones included (offset-commit-count).",
                Kind.COUNTER,
                samples=[((), coordinator.offset_commits)],
            ),
            Family(
                f"{gcm}_partition_load_time_max",
                "The longest load of a __consumer_offsets partition, ms (partition-load-time-max).",
                Kind.GAUGE,
                samples=[((), runtime.load_seconds_max * 1000)],
            ),
            Family(
                f"{gcm}_partition_load_time_avg",
                "The mean load of a __consumer_offsets partition, ms (partition-load-time-avg).",
                Kind.GAUGE,
                samples=[((), runtime.load_seconds_total * 1000 / max(1, runtime.loads))],
            ),
        ]
        return out

    # --- storage and the event loop ------------------------------------------------------------------------

    def _storage_families(self) -> list[Family]:
        cumulative, total = _histogram(files.FSYNC_SECONDS)
        flusher = self.broker.replicas.flusher
        return [
            Family(
                "exactly_storage_fsync_seconds",
                "Latency of data-file fsyncs.",
                Kind.HISTOGRAM,
                buckets=[((), cumulative, total)],
            ),
            Family(
                "exactly_storage_flushes",
                "Flushes that made appends durable before their answer, by where they ran: on the event "
                "loop (inline, nothing else to do), on a flush thread (one log), or one syncfs for many.",
                Kind.COUNTER,
                ("way",),
                samples=[
                    (("inline",), flusher.inline_flushes),
                    (("thread",), flusher.thread_flushes),
                    (("group",), flusher.group_syncs),
                ],
            ),
            Family(
                "exactly_storage_segment_files_open",
                "Segment files open now (the LRU's size).",
                Kind.GAUGE,
                samples=[((), HANDLES.open_count)],
            ),
            Family(
                "exactly_storage_segment_files_budget",
                "Segment files kept open at most (exactly.log.max.open.files).",
                Kind.GAUGE,
                samples=[((), HANDLES.budget)],
            ),
            Family(
                "exactly_storage_segment_file_lru_hits",
                "Segment file uses that found it open.",
                Kind.COUNTER,
                samples=[((), HANDLES.hits)],
            ),
            Family(
                "exactly_storage_segment_file_opens",
                "Segment files opened: first uses and reopenings after eviction (LRU misses).",
                Kind.COUNTER,
                samples=[((), HANDLES.opens)],
            ),
            Family(
                "exactly_storage_segment_file_lru_evictions",
                "Segment files closed to stay within the budget.",
                Kind.COUNTER,
                samples=[((), HANDLES.evictions)],
            ),
        ]

    def _loop_families(self) -> list[Family]:
        lag = self.loop_lag
        if lag is None:
            return []
        cumulative, total = _histogram(lag.histogram)
        return [
            Family(
                "exactly_event_loop_lag_seconds",
                "How late the event loop ran a timer (sampled every 0.25 s): time other work held it.",
                Kind.HISTOGRAM,
                buckets=[((), cumulative, total)],
            ),
            Family(
                "exactly_event_loop_lag_last_seconds",
                "The last event-loop lag sample.",
                Kind.GAUGE,
                samples=[((), lag.last)],
            ),
        ]


# --- rendering (any thread) -------------------------------------------------------------------------------


def metric_families(families: Iterable[Family]) -> list[Metric]:
    """prometheus_client metric families of the snapshot."""
    out = []
    for family in families:
        metric = Metric(family.name, family.doc, family.kind.value)
        names = family.labels
        samples = metric.samples
        if family.kind is Kind.HISTOGRAM:
            for values, cumulative, total in family.buckets:
                labels = dict(zip(names, values, strict=False))
                for bound, count in cumulative:
                    le = "+Inf" if bound == float("inf") else repr(float(bound))
                    samples.append(Sample(f"{family.name}_bucket", {**labels, "le": le}, count))
                samples.append(Sample(f"{family.name}_count", labels, cumulative[-1][1]))
                samples.append(Sample(f"{family.name}_sum", labels, total))
        else:
            name = f"{family.name}_total" if family.kind is Kind.COUNTER else family.name
            for values, value in family.samples:
                samples.append(Sample(name, dict(zip(names, values, strict=False)), value))
        out.append(metric)
    return out


class _Fixed(Collector):
    def __init__(self, metrics: list[Metric]) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable[Metric]:
        return self._metrics


def render(families: Iterable[Family]) -> bytes:
    """The text exposition format of a snapshot (prometheus_client's `generate_latest`)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(metric_families(families)))
    return generate_latest(registry)


# --- the event loop's lag -----------------------------------------------------------------------------------


class LoopLag:
    """Samples how late the event loop wakes a sleeping task: the time something else held the loop."""

    def __init__(self, interval_s: float = 0.25) -> None:
        self.interval_s = interval_s
        self.histogram = Histogram(SECONDS_BUCKETS)
        self.last = 0.0

    async def run(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(self.interval_s)
            lag = max(0.0, time.perf_counter() - start - self.interval_s)
            self.last = lag
            self.histogram.observe(lag)


# --- readiness --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Readiness:
    """Whether the broker should get traffic (`/readyz`), and if not, why (one reason per line)."""

    reasons: tuple[str, ...]

    @property
    def ready(self) -> bool:
        return not self.reasons


def readiness(broker: Broker) -> Readiness:
    """Ready: serving requests, every log loaded, the coordinators' partitions loaded, and in a cluster
    registered in ZooKeeper with every partition it follows back in its ISR."""
    reasons: list[str] = []
    if not broker.serving:
        reasons.append("starting up" if not broker.stopping else "shutting down")
    pending = broker.replicas.logs.pending
    if pending:
        reasons.append(f"{pending} partitions still loading")
    for name, runtime in (("group", broker.groups.runtime), ("transaction", broker.transactions.runtime)):
        if runtime.loading:
            reasons.append(f"the {name} coordinator is loading a partition")
    cluster = broker.cluster
    if cluster is not None:
        if not cluster.registered:
            reasons.append("not registered in ZooKeeper")
        replicas = broker.replicas
        behind = sum(
            1
            for p in replicas.partitions()
            if not p.is_leader and p.leader_id >= 0 and replicas.local_id not in p.isr
        )
        if behind:
            reasons.append(f"{behind} followed partitions not caught up (not in their ISR)")
    return Readiness(tuple(reasons))
