"""The metrics collector against a broker built in-process (`Broker`, started on port 0, a manual clock):
state gauges are read from the logs, the ISR and the coordinators at scrape time; produce and request
counters come from requests sent over a socket; the HTTP listener answers /metrics, /healthz, /readyz."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

import exactly.broker.handlers  # noqa: F401  (registers the handlers)
from exactly.broker.config import BrokerConfig
from exactly.broker.metrics import Family, Kind, render
from exactly.broker.server import Broker
from exactly.clock import ManualClock
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from exactly.txn import TxnState
from tests.broker.parts import until
from tests.interop.client import RawClient
from tests.storage.helpers import data_batch

Values = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@asynccontextmanager
async def running(tmp_path: Path, clock: ManualClock | None = None, **settings: str) -> AsyncIterator[Broker]:
    props = {
        "log.dirs": str(tmp_path / "data"),
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "metrics.listener": "http://127.0.0.1:0",
        "offsets.topic.num.partitions": "2",
        "transaction.state.log.num.partitions": "2",
        **{k.replace("_", "."): v for k, v in settings.items()},
    }
    broker = Broker(BrokerConfig.from_properties(props), clock)
    await broker.start()
    try:
        yield broker
    finally:
        broker.request_stop()
        await broker.stop()


def values(broker: Broker) -> Values:
    """Every sample of a scrape: (sample name, sorted labels) -> value."""
    assert broker.metrics_server is not None
    families = broker.metrics_server._collector.snapshot()
    return parse(render(families).decode())


def parse(text: str) -> Values:
    out: Values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def one(found: Values, name: str, **labels: str) -> float:
    return found[(name, tuple(sorted(labels.items())))]


async def in_thread(work: Callable[[], Any]) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, work)


def produce(bootstrap: str, topic: str, batches: Iterable[bytes], version: int = 9) -> list[int]:
    client = RawClient(bootstrap)
    codes = []
    try:
        for batch in batches:
            request = ProduceRequest(
                None, -1, 5000, [TopicProduceData(topic, partition_data=[PartitionProduceData(0, batch)])]
            )
            response = client.request(ApiKey.PRODUCE, version, request)
            codes.append(response.responses[0].partition_responses[0].error_code)
    finally:
        client.close()
    return codes


async def http(port: int, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split(" ")[1]), {k.lower(): v for k, v in headers.items()}, body


def test_log_gauges_are_the_logs_offsets_and_sizes(tmp_path: Path) -> None:
    async def run() -> None:
        async with running(tmp_path) as broker:
            await broker.topics.create_topic("data", 2, {})
            partition = broker.replicas.online_partition("data", 1)
            broker.replicas.append_records(partition, data_batch(3))
            broker.replicas.append_records(partition, data_batch(2))
            found = values(broker)
            assert one(found, "kafka_log_log_logendoffset", topic="data", partition="1") == 5
            assert one(found, "kafka_log_log_logendoffset", topic="data", partition="0") == 0
            assert one(found, "kafka_log_log_logstartoffset", topic="data", partition="1") == 0
            assert (
                one(found, "kafka_log_log_size", topic="data", partition="1")
                == partition.log.size_in_bytes
                > 0
            )
            assert one(found, "exactly_log_lso_lag", topic="data", partition="1") == 0
            partitions = len(broker.replicas.logs.partitions())
            assert one(found, "kafka_server_replicamanager_partitioncount") == partitions >= 2
            assert one(found, "kafka_server_replicamanager_leadercount") == partitions
            assert one(found, "kafka_server_replicamanager_underreplicatedpartitions") == 0
            assert one(found, "kafka_server_replicamanager_offlinereplicacount") == 0

    asyncio.run(run())


def test_per_partition_series_can_be_turned_off(tmp_path: Path) -> None:
    async def run() -> None:
        async with running(tmp_path, metrics_per_partition_enable="false") as broker:
            await broker.topics.create_topic("data", 3, {})
            found = values(broker)
            assert not any(name.startswith("kafka_log_log_") for name, _ in found)
            assert not any(name == "exactly_log_lso_lag" for name, _ in found)
            assert one(found, "kafka_server_replicamanager_partitioncount") >= 3

    asyncio.run(run())


def test_an_open_transaction_shows_its_age_and_lso_lag_until_it_commits(tmp_path: Path) -> None:
    async def run() -> None:
        clock = ManualClock()
        async with running(tmp_path, clock, transaction_max_timeout_ms="60000") as broker:
            await broker.topics.create_topic("data", 1, {})
            service = broker.transactions
            init = await service.run("tx", lambda c: c.init_producer_id("tx", 60_000))
            pid, epoch = init.producer_id, init.producer_epoch
            added = await service.run("tx", lambda c: c.add_partitions("tx", pid, epoch, [("data", 0)]))
            assert added.error == ErrorCode.NONE
            partition = broker.replicas.online_partition("data", 0)
            batch = data_batch(4, pid=pid, epoch=epoch, seq=0, txn=True, ts=clock.milliseconds())
            broker.replicas.append_records(partition, batch)
            clock.advance(5_000)
            found = values(broker)
            assert one(found, "exactly_transaction_coordinator_ongoing_transactions") == 1
            assert one(found, "exactly_transaction_coordinator_transactions", state="Ongoing") == 1
            assert one(found, "exactly_transaction_coordinator_oldest_open_transaction_age_seconds") == 5.0
            assert one(found, "exactly_log_lso_lag", topic="data", partition="0") == 4
            assert one(found, "exactly_log_lso_lag_max") == 4
            assert one(found, "exactly_log_hanging_transactions") == 0
            clock.advance(60_000)  # the producer last wrote more than transaction.max.timeout.ms ago
            assert one(values(broker), "exactly_log_hanging_transactions") == 1
            ended = await service.run("tx", lambda c: c.end_transaction("tx", pid, epoch, True))
            assert ended.error == ErrorCode.NONE
            await until(lambda: service.coordinator.transactions["tx"].state is TxnState.COMPLETE_COMMIT)
            found = values(broker)
            assert one(found, "exactly_transaction_coordinator_ongoing_transactions") == 0
            assert one(found, "exactly_transaction_coordinator_oldest_open_transaction_age_seconds") == 0
            assert one(found, "exactly_log_lso_lag", topic="data", partition="0") == 0
            assert one(found, "exactly_log_hanging_transactions") == 0
            assert one(found, "exactly_transaction_coordinator_commits_total") == 1
            assert one(found, "exactly_transaction_coordinator_aborts_total") == 0
            assert one(found, "exactly_transaction_markers_written_total") == 1
            assert one(found, "kafka_server_transaction_coordinator_metrics_partition_load_time_max") >= 0

    asyncio.run(run())


def test_produce_requests_count_messages_bytes_failures_and_timings(tmp_path: Path) -> None:
    async def run() -> None:
        async with running(tmp_path) as broker:
            await broker.topics.create_topic("data", 1, {})
            bootstrap = f"127.0.0.1:{broker.port}"
            batches = [data_batch(3), data_batch(5)]
            codes = await in_thread(lambda: produce(bootstrap, "data", batches))
            assert codes == [ErrorCode.NONE, ErrorCode.NONE]
            await broker.groups.ensure_topic()
            failed = await in_thread(lambda: produce(bootstrap, "__consumer_offsets", [data_batch(1)]))
            assert failed == [ErrorCode.INVALID_TOPIC_EXCEPTION]
            unknown = await in_thread(lambda: produce(bootstrap, "nowhere", [data_batch(1)]))
            assert unknown == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
            # the response is on its way before the writer records its timings
            await until(lambda: broker.stats is not None and broker.stats.requests[0].total.count == 4)
            found = values(broker)
            metric = "kafka_server_brokertopicmetrics_"
            assert one(found, f"{metric}messagesin_total", topic="data") == 8
            assert one(found, f"{metric}messagesin_total") == 8
            assert one(found, f"{metric}bytesin_total", topic="data") == sum(len(b) for b in batches)
            assert one(found, f"{metric}totalproducerequests_total", topic="data") == 2
            assert one(found, f"{metric}failedproducerequests_total", topic="data") == 0
            assert one(found, f"{metric}failedproducerequests_total", topic="__consumer_offsets") == 1
            assert one(found, f"{metric}failedproducerequests_total") == 2  # "nowhere" in the sum only
            assert not any(("topic", "nowhere") in labels for _, labels in found)
            assert (
                one(found, "kafka_network_requestmetrics_requests_total", request="Produce", version="9") == 4
            )
            errors = "kafka_network_requestmetrics_errors_total"
            assert one(found, errors, request="Produce", error="NONE") == 2
            assert one(found, errors, request="Produce", error="INVALID_TOPIC_EXCEPTION") == 1
            assert one(found, errors, request="Produce", error="UNKNOWN_TOPIC_OR_PARTITION") == 1
            assert one(found, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == 4
            assert (
                one(found, "kafka_network_requestmetrics_totaltimems_bucket", request="Produce", le="+Inf")
                == 4
            )
            assert one(found, "kafka_network_requestmetrics_totaltimems_sum", request="Produce") > 0
            assert one(found, "kafka_network_requestmetrics_remotetimems_count", request="Produce") == 4
            listener = "kafka_server_socket_server_metrics_connection_"
            await until(lambda: broker.stats is not None and broker.stats.listeners["PLAINTEXT"].closed == 3)
            found = values(broker)
            assert one(found, f"{listener}creation_total", listener="PLAINTEXT") == 3
            assert one(found, f"{listener}close_total", listener="PLAINTEXT") == 3
            assert one(found, f"{listener}count", listener="PLAINTEXT") == 0
            assert one(found, "exactly_storage_fsync_seconds_count") > 0

    asyncio.run(run())


def test_without_a_metrics_listener_nothing_is_counted(tmp_path: Path) -> None:
    async def run() -> None:
        async with running(tmp_path, metrics_listener="") as broker:
            await broker.topics.create_topic("data", 1, {})
            codes = await in_thread(lambda: produce(f"127.0.0.1:{broker.port}", "data", [data_batch(1)]))
            assert codes == [ErrorCode.NONE]
            assert broker.stats is None
            assert broker.metrics_server is None

    asyncio.run(run())


def test_the_http_listener_serves_metrics_and_probes(tmp_path: Path) -> None:
    async def run() -> None:
        async with running(tmp_path) as broker:
            assert broker.metrics_server is not None
            port = broker.metrics_server.port
            status, headers, body = await http(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (status, body) == (200, b"ok\n")
            status, _, body = await http(port, b"GET /readyz HTTP/1.1\r\n\r\n")
            assert (status, body) == (200, b"ready\n")
            status, headers, body = await http(port, b"GET /metrics HTTP/1.1\r\n\r\n")
            assert status == 200
            assert headers["content-type"] == CONTENT_TYPE_LATEST  # prometheus_client's text format
            assert int(headers["content-length"]) == len(body)
            assert ("kafka_server_replicamanager_partitioncount", ()) in parse(body.decode())
            status, headers, zipped = await http(
                port, b"GET /metrics?x=1 HTTP/1.1\r\nAccept-Encoding: gzip, deflate\r\n\r\n"
            )
            assert (status, headers["content-encoding"]) == (200, "gzip")
            assert b"kafka_server_replicamanager_leadercount" in gzip.decompress(zipped)
            status, headers, body = await http(port, b"HEAD /healthz HTTP/1.1\r\n\r\n")
            assert (status, headers["content-length"], body) == (200, "3", b"")
            assert (await http(port, b"GET /nope HTTP/1.1\r\n\r\n"))[0] == 404
            assert (await http(port, b"POST /metrics HTTP/1.1\r\n\r\n"))[0] == 405
            assert (await http(port, b"nonsense\r\n\r\n"))[0] == 400

    asyncio.run(run())


def test_readyz_names_what_is_not_ready(tmp_path: Path) -> None:
    async def run() -> None:
        async with running(tmp_path) as broker:
            await broker.topics.create_topic("data", 1, {})
            assert broker.readiness().ready
            broker.replicas.logs._unloaded[("data", 9)] = None  # type: ignore[assignment]
            broker.groups.runtime._loading.add(0)
            try:
                assert broker.metrics_server is not None
                status, _, body = await http(broker.metrics_server.port, b"GET /readyz HTTP/1.1\r\n\r\n")
                assert status == 503
                assert body.decode().splitlines() == [
                    "1 partitions still loading",
                    "the group coordinator is loading a partition",
                ]
            finally:
                del broker.replicas.logs._unloaded[("data", 9)]
                broker.groups.runtime._loading.discard(0)

    asyncio.run(run())


def test_render_makes_counters_histograms_and_the_all_topics_sample() -> None:
    families = [
        Family("c", "a counter", Kind.COUNTER, ("topic",), [((), 3), (("a",), 1), (("b",), 2)]),
        Family(
            "h",
            "a histogram",
            Kind.HISTOGRAM,
            ("request",),
            buckets=[(("P",), [(1.0, 1), (float("inf"), 2)], 7.5)],
        ),
    ]
    found = parse(render(families).decode())
    assert found == {
        ("c_total", ()): 3,
        ("c_total", (("topic", "a"),)): 1,
        ("c_total", (("topic", "b"),)): 2,
        ("h_bucket", (("le", "1.0"), ("request", "P"))): 1,
        ("h_bucket", (("le", "+Inf"), ("request", "P"))): 2,
        ("h_count", (("request", "P"),)): 2,
        ("h_sum", (("request", "P"),)): 7.5,
    }
