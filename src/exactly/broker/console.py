"""The web console served under /console/ of the metrics listener: the broker's state read into the views
of exactly.console.model, and the HTTP answers for them.

`console.enable=true` (and `metrics.listener`) turns it on; exactly.broker.metrics_http hands it every
request whose path starts with /console. Reading happens on the event loop — the state is the loop's —
and copies numbers and names into frozen views (a few microseconds per partition, group or transactional
id); the HTML is rendered from them in a worker thread, as /metrics' exposition is.

Security (exactly.console.auth): with a SASL listener or an authorizer configured, every request needs
HTTP basic authentication against the SCRAM credentials (and DESCRIBE on the CLUSTER with an authorizer);
otherwise the console is open to whoever reaches the metrics listener.

What one broker shows: the brokers page shows the whole cluster (its ZooKeeper view); the partition
offsets, sizes and records are those of the logs on this broker (a partition led elsewhere shows its
leader and ISR only); groups and transactions are those this broker coordinates. In a cluster, open
each broker's console, or put them behind one address per broker.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING

from exactly.console.assignment import decode_assignment
from exactly.console.auth import AuthResult, ConsoleAuth
from exactly.console.model import (
    BrokerRow,
    BrokersView,
    Decision,
    GroupMemberRow,
    GroupsView,
    GroupView,
    Isolation,
    LagRow,
    OpenTxnRow,
    PartitionRow,
    PreparedBatch,
    PreparedTxnRow,
    RecordsView,
    TopicsView,
    TopicView,
    TwoPhaseView,
    TxnRow,
    TxnsView,
    abort_command,
)
from exactly.console.pages import STATIC_FILES, Page, View, render, static_file
from exactly.console.rates import Rates
from exactly.console.records import AbortedRange, browse
from exactly.errors import KafkaError
from exactly.security.acls import CLUSTER_NAME
from exactly.security.operations import AclOperation, ResourceType
from exactly.security.principal import KafkaPrincipal
from exactly.storage.log import Isolation as LogIsolation
from exactly.storage.log import PartitionLog
from exactly.txn.state import TxnState

if TYPE_CHECKING:
    from exactly.broker.server import Broker

__all__ = ["Console", "Response"]

Response = tuple[int, str, bytes, list[str]]  # status, content type, body, more header lines

_HTML = "text/html; charset=utf-8"
_TEXT = "text/plain; charset=utf-8"
_OPEN = frozenset(
    {TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE}
)
_RECORDS_PAGE = 50
_RECORDS_BYTES = 1 << 20


class Console:
    """Answers /console/ requests for one broker."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.rates = Rates()
        config = broker.config
        secured = bool(config.authorizer_class_name) or any(
            listener.protocol.sasl for listener in config.listeners
        )
        authorize = None
        if broker.authorizer is not None:
            authorizer = broker.authorizer

            def authorize(user: str) -> bool:
                return authorizer.authorize(
                    KafkaPrincipal("User", user),
                    "",
                    AclOperation.DESCRIBE,
                    ResourceType.CLUSTER,
                    CLUSTER_NAME,
                )

        credentials = broker.metadata.scram_credentials
        self.auth = ConsoleAuth(
            secured, lambda user, mechanism: credentials.get((user, mechanism)), authorize
        )
        self.security = (
            "HTTP basic authentication against the SCRAM credentials"
            + (", DESCRIBE on the cluster" if authorize is not None else "")
            if secured
            else "off (the broker has no SASL listener and no authorizer)"
        )

    # --- HTTP ----------------------------------------------------------------------------------------------

    async def respond(self, method: str, target: str, headers: Mapping[str, str]) -> Response:
        """The answer to one request for a path under /console (headers: lower-case names)."""
        path, _, raw_query = target.partition("?")
        if method not in ("GET", "HEAD"):
            return 405, _TEXT, b"method not allowed\n", ["Allow: GET, HEAD"]
        result, user = self.auth.check(headers.get("authorization"), self.broker.clock.milliseconds())
        if result is AuthResult.UNAUTHENTICATED:
            return (
                401,
                _TEXT,
                b"authentication required\n",
                ['WWW-Authenticate: Basic realm="exactly console"'],
            )
        if result is AuthResult.FORBIDDEN:
            return 403, _TEXT, b"not authorized to describe the cluster\n", []
        if path.startswith("/console/static/"):
            name = path.removeprefix("/console/static/")
            body = static_file(name)
            if body is None:
                return 404, _TEXT, b"not found\n", []
            return 200, STATIC_FILES[name], body, ["Cache-Control: max-age=300"]
        page = Page.for_path(path)
        if page is None:
            return 404, _TEXT, b"not found: try /console/\n", []
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(raw_query).items()}
        view = self.view(page, query)  # on the loop
        fragment = headers.get("x-console-fragment") == "1"
        html = await asyncio.get_running_loop().run_in_executor(
            None, lambda: render(page, view, fragment=fragment, user=user)
        )
        return 200, _HTML, html.encode(), ["Cache-Control: no-store"]

    # --- views (on the event loop) -------------------------------------------------------------------------

    def view(self, page: Page, query: Mapping[str, str]) -> View:
        if page is Page.BROKERS:
            return self.brokers()
        if page is Page.TOPICS:
            return self.topics(query.get("internal") == "1")
        if page is Page.GROUPS:
            return self.groups()
        if page is Page.TRANSACTIONS:
            return self.transactions()
        if page is Page.TWO_PHASE:
            return self.two_phase()
        return self.records(query)

    def _now(self) -> int:
        return self.broker.clock.milliseconds()

    def brokers(self) -> BrokersView:
        broker = self.broker
        config = broker.config
        me = config.node_id
        cluster = broker.cluster
        rows: list[BrokerRow] = []
        problems: list[PartitionRow] = []
        if cluster is None:
            endpoints = tuple(
                f"{listener.name}://{host}:{port}"
                for listener in config.listeners
                for host, port in [broker.advertised_for(listener)]
            )
            rows.append(BrokerRow(me, endpoints, None, True, True, True))
        else:
            cache = cluster.cache
            for broker_id in sorted(cache.brokers):
                registration = cache.brokers[broker_id]
                rows.append(
                    BrokerRow(
                        broker_id,
                        tuple(f"{e.listener}://{e.host}:{e.port}" for e in registration.endpoints),
                        registration.rack,
                        broker_id == cache.controller_id,
                        broker_id == me,
                        cache.is_live(broker_id),
                    )
                )
            if me not in cache.brokers:
                rows.append(BrokerRow(me, (), None, False, True, False))
            for topic in sorted(cache.assignments):
                for index in sorted(cache.assignments[topic].partitions):
                    view = cache.partition(topic, index)
                    if view is None:
                        continue
                    if view.leader < 0 or len(view.isr) < len(view.replicas):
                        problems.append(PartitionRow(topic, index, view.leader, view.replicas, view.isr))
        replicas = broker.replicas
        partitions = replicas.logs.partitions()
        leaders = len(partitions) if cluster is None else sum(1 for p in replicas.partitions() if p.is_leader)
        return BrokersView(
            now_ms=self._now(),
            cluster=cluster is not None,
            this_broker=me,
            brokers=tuple(rows),
            partitions=len(partitions),
            leaders=leaders,
            problems=tuple(problems),
            readiness=broker.readiness().reasons,
            security=self.security,
        )

    def _partition_row(self, topic: str, index: int) -> PartitionRow:
        broker = self.broker
        replicas = broker.replicas
        cluster = broker.cluster
        me = broker.config.node_id
        leader = me
        assigned: tuple[int, ...] = (me,)
        isr: tuple[int, ...] = (me,)
        if cluster is not None:
            view = cluster.cache.partition(topic, index)
            if view is not None:
                leader, assigned, isr = view.leader, view.replicas, view.isr
        log: PartitionLog | None = None
        try:
            log = replicas.logs.get_log(topic, index)
        except KafkaError:
            log = None
        if log is None:
            return PartitionRow(topic, index, leader, assigned, isr)
        return PartitionRow(
            topic,
            index,
            leader,
            assigned,
            isr,
            log_start=log.log_start_offset,
            lso=log.last_stable_offset,
            high_watermark=log.high_watermark,
            log_end=log.log_end_offset,
            size_bytes=log.size_in_bytes,
            records_per_s=self.rates.rate(("leo", topic, index)),
        )

    def topics(self, show_internal: bool) -> TopicsView:
        broker = self.broker
        now = self._now()
        counters: dict[object, float] = {}
        out: list[TopicView] = []
        stats = broker.stats
        for name in sorted(broker.metadata.topics):
            info = broker.metadata.topics[name]
            if info.internal and not show_internal:
                continue
            rows = [self._partition_row(name, index) for index in range(info.partitions)]
            for row in rows:
                if row.local:
                    counters[("leo", name, row.partition)] = row.log_end
            topic_stats = stats.topics.get(name) if stats is not None else None
            if topic_stats is not None:
                counters[("in", name)] = topic_stats.messages_in
                counters[("bytes_in", name)] = topic_stats.bytes_in
                counters[("bytes_out", name)] = topic_stats.bytes_out
            out.append(
                TopicView(
                    name,
                    info.internal,
                    tuple(rows),
                    self.rates.rate(("in", name)),
                    self.rates.rate(("bytes_in", name)),
                    self.rates.rate(("bytes_out", name)),
                )
            )
        self.rates.observe(now, counters)
        return TopicsView(now, tuple(out), show_internal)

    def groups(self) -> GroupsView:
        broker = self.broker
        coordinator = broker.groups.coordinator
        topic_names = {info.topic_id: name for name, info in broker.metadata.topics.items()}
        views: list[GroupView] = []
        group_ids = sorted({*coordinator.groups, *coordinator.consumer_groups, *coordinator.offsets.groups()})
        for group_id in group_ids:
            members: list[GroupMemberRow] = []
            group_type, state, protocol = "classic", "Empty", ""
            classic = coordinator.groups.get(group_id)
            consumer = coordinator.consumer_groups.get(group_id)
            if classic is not None:
                state = classic.state.value
                protocol = classic.protocol_name or ""
                for m in classic.members.values():
                    assigned = decode_assignment(m.assignment) if m.assignment else ()
                    members.append(GroupMemberRow(m.member_id, m.client_id, m.client_host, assigned or ()))
            elif consumer is not None:
                group_type, state = "consumer", consumer.state.value
                protocol = consumer.preferred_assignor("uniform")
                for cm in consumer.members.values():
                    pairs = tuple(
                        sorted(
                            (topic_names.get(topic_id, str(topic_id)), p)
                            for topic_id, ps in cm.current.assigned.items()
                            for p in ps
                        )
                    )
                    members.append(GroupMemberRow(cm.member_id, cm.client_id, cm.client_host, pairs))
            owners = {tp: m.client_id for m in members for tp in m.assignment}
            lag: list[LagRow] = []
            committed_offsets = {
                tp: c.offset for tp, c in coordinator.offsets.group_offsets(group_id).items()
            }
            for tp in owners:  # assigned, nothing committed yet
                committed_offsets.setdefault(tp, -1)
            for (topic, index), committed in sorted(committed_offsets.items()):
                high_watermark = -1
                try:
                    log = broker.replicas.logs.get_log(topic, index)
                except KafkaError:
                    log = None
                if log is not None:
                    high_watermark = log.high_watermark
                lag.append(LagRow(topic, index, committed, high_watermark, owners.get((topic, index), "")))
            views.append(GroupView(group_id, group_type, state, protocol, tuple(members), tuple(lag)))
        return GroupsView(self._now(), tuple(views))

    def hanging_after_ms(self) -> int:
        config = self.broker.config
        threshold = config.console_hanging_transaction_ms
        return threshold if threshold >= 0 else config.transaction_max_timeout_ms

    def transactions(self) -> TxnsView:
        broker = self.broker
        now = self._now()
        threshold = self.hanging_after_ms()
        coordinator = broker.transactions.coordinator
        # the open transactions in the logs here: (producer id) -> [(topic, partition, first offset, ...)]
        open_in_logs: list[tuple[str, int, int, int, int]] = []  # topic, partition, pid, first, last write
        starts: dict[tuple[int, str, int], int] = {}
        epochs: dict[int, int] = {}
        for (topic, index), log in broker.replicas.logs.logs():
            producer_state = log.producer_state
            if producer_state.first_unstable_offset is None:
                continue
            for ongoing in producer_state.ongoing_transactions():
                entry = producer_state.last_entry(ongoing.producer_id)
                last = entry.last_timestamp if entry is not None else -1
                if entry is not None:
                    epochs[ongoing.producer_id] = entry.producer_epoch
                open_in_logs.append((topic, index, ongoing.producer_id, ongoing.first_offset, last))
                starts[(ongoing.producer_id, topic, index)] = ongoing.first_offset
        rows: list[TxnRow] = []
        by_producer: dict[int, TxnRow] = {}
        for txn_id in sorted(coordinator.transactions):
            txn = coordinator.transactions[txn_id]
            is_open = txn.state in _OPEN
            age = now - txn.start_timestamp if is_open and txn.start_timestamp >= 0 else -1
            hanging = is_open and age > threshold
            partitions = tuple(sorted(txn.partitions))
            commands = tuple(
                abort_command(topic, index, starts[(txn.producer_id, topic, index)])
                for topic, index in partitions
                if hanging and (txn.producer_id, topic, index) in starts
            )
            row = TxnRow(
                txn_id,
                txn.state.kafka_name,
                txn.producer_id,
                txn.producer_epoch,
                txn.timeout_ms,
                partitions,
                age,
                hanging,
                commands,
            )
            rows.append(row)
            if is_open or txn.state is TxnState.PREPARED:
                by_producer[txn.producer_id] = row
        open_rows: list[OpenTxnRow] = []
        for topic, index, producer_id, first_offset, last in sorted(open_in_logs):
            idle = now - last if last >= 0 else -1
            owner = by_producer.get(producer_id)
            known = owner is not None and (topic, index) in owner.partitions
            prepared = owner is not None and owner.state == TxnState.PREPARED.kafka_name
            hanging = (
                not prepared and idle > threshold and (not known or (owner is not None and owner.hanging))
            )
            open_rows.append(
                OpenTxnRow(
                    topic,
                    index,
                    producer_id,
                    epochs.get(producer_id, -1),
                    first_offset,
                    idle,
                    owner.transactional_id if owner is not None else None,
                    hanging,
                )
            )
        return TxnsView(now, threshold, tuple(rows), tuple(open_rows))

    def two_phase(self) -> TwoPhaseView:
        broker = self.broker
        now = self._now()
        coordinator = broker.transactions.coordinator
        by_batch: dict[tuple[str, int], list[PreparedTxnRow]] = {}
        decisions = coordinator.decisions
        for txn in coordinator.list_prepared():
            tag = txn.prepared
            if tag is None:
                continue
            decision = decisions.get(tag.query_id, tag.batch_id)
            winner = None if decision is None else txn.transactional_id in decision.winners
            by_batch.setdefault((tag.query_id, tag.batch_id), []).append(
                PreparedTxnRow(
                    txn.transactional_id,
                    tag.partition,
                    txn.producer_id,
                    txn.producer_epoch,
                    max(0, now - tag.prepared_timestamp_ms),
                    tuple(sorted(txn.partitions)),
                    winner,
                )
            )
        batches = []
        for (query_id, batch_id), txns in sorted(by_batch.items()):
            decision = decisions.get(query_id, batch_id)
            batches.append(
                PreparedBatch(
                    query_id,
                    batch_id,
                    Decision.UNDECIDED if decision is None else Decision.COMMIT,
                    tuple(txns),
                    () if decision is None else tuple(decision.winners),
                )
            )
        decided = tuple((d.query_id, d.batch_id, len(d.winners)) for d in decisions.all())
        return TwoPhaseView(now, broker.config.transaction_two_phase_commit_enable, tuple(batches), decided)

    def records(self, query: Mapping[str, str]) -> RecordsView:
        now = self._now()
        topic = query.get("topic", "")
        isolation = (
            Isolation.READ_UNCOMMITTED
            if query.get("isolation") == Isolation.READ_UNCOMMITTED.value
            else Isolation.READ_COMMITTED
        )

        def failed(why: str, partition: int = 0, offset: int = 0) -> RecordsView:
            return RecordsView(now, topic, partition, isolation, offset, (), offset, -1, -1, -1, -1, 0, why)

        try:
            partition = int(query.get("partition", "0"))
            wanted = int(query["offset"]) if query.get("offset") else None
        except ValueError:
            return failed("partition and offset must be integers")
        if not topic:
            return failed("choose a topic and a partition", partition)
        try:
            log = self.broker.replicas.logs.get_log(topic, partition)
        except KafkaError as e:
            return failed(e.message or str(e.code), partition)
        if log is None:
            return failed(f"{topic}-{partition} has no log on this broker", partition)
        start = log.log_start_offset
        offset = max(start, wanted if wanted is not None else log.log_end_offset - _RECORDS_PAGE)
        if wanted is not None and wanted < 0:  # from the end
            offset = max(start, log.log_end_offset + wanted)
        offset = min(offset, log.log_end_offset)
        lso = log.last_stable_offset
        level = (
            LogIsolation.READ_COMMITTED
            if isolation is Isolation.READ_COMMITTED
            else LogIsolation.READ_UNCOMMITTED
        )
        try:
            data = log.read(offset, _RECORDS_BYTES, level).records
        except KafkaError as e:
            return failed(e.message or str(e.code), partition, offset)
        aborted = [
            AbortedRange(t.producer_id, t.first_offset, t.last_offset)
            for t in log.collect_aborted_transactions(offset, log.log_end_offset)
        ]
        browsed = browse(bytes(data), aborted, isolation, offset, lso, _RECORDS_PAGE)
        return RecordsView(
            now,
            topic,
            partition,
            isolation,
            offset,
            browsed.rows,
            browsed.next_offset,
            start,
            lso,
            log.high_watermark,
            log.log_end_offset,
            browsed.skipped_aborted,
        )
