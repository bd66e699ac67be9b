"""Configs as Kafka has them (issue 10.3), through the real admin clients.

Topic configs given to CreateTopics are stored and described with Kafka's values, sources, synonyms,
KIP-569 types and documentation; `compression.type=gzip` makes the broker store gzip batches whatever the
producer sent, and every client reads them; list values keep their order and may be empty; the broker
resource lists every broker config; run-time broker configs change, persist across a restart and take
effect; the legacy AlterConfigs replaces a resource's overrides (aiokafka, kafka-python); bad values get
INVALID_CONFIG.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exactly.configs import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigSource, ConfigType
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.alter_configs import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
)
from exactly.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from exactly.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from exactly.protocol.messages.incremental_alter_configs import (
    AlterableConfig as IncrementalConfig,
)
from exactly.protocol.messages.incremental_alter_configs import (
    AlterConfigsResource as IncrementalResource,
)
from exactly.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from exactly.protocol.messages.list_config_resources import ListConfigResourcesRequest
from exactly.records import Compression, iter_batches
from exactly.testing.processes import BrokerProcess
from tests.interop.client import RawClient
from tests.interop.support import EARLIEST, fetch_partition, list_offset, running_broker
from tests.interop.test_clients_roundtrip import (
    consume_aiokafka,
    consume_confluent,
    consume_kafka_python,
)

pytestmark = pytest.mark.interop

TIMEOUT = 30.0
TOPIC, BROKER = 2, 4
TOPIC_SOURCE = ConfigSource.DYNAMIC_TOPIC_CONFIG
DEFAULT = ConfigSource.DEFAULT_CONFIG


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("configs") / "data") as proc:
        yield proc


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture(scope="module")
def kadmin(broker: BrokerProcess) -> Iterator[Any]:
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    yield client
    client.close()


def confluent_create(admin: Any, topic: str, configs: dict[str, str], partitions: int = 1) -> None:
    from confluent_kafka.admin import NewTopic

    (future,) = admin.create_topics(
        [NewTopic(topic, partitions, 1, config=configs)], request_timeout=TIMEOUT
    ).values()
    assert future.result(TIMEOUT) is None


def confluent_describe(admin: Any, resource_type: int, name: str) -> dict[str, Any]:
    from confluent_kafka.admin import ConfigResource, ResourceType

    kind = ResourceType.TOPIC if resource_type == TOPIC else ResourceType.BROKER
    (future,) = admin.describe_configs([ConfigResource(kind, name)], request_timeout=TIMEOUT).values()
    entries: dict[str, Any] = future.result(TIMEOUT)
    return entries


def confluent_error(future: Any) -> int:
    from confluent_kafka import KafkaException

    try:
        future.result(TIMEOUT)
    except KafkaException as e:
        code: int = e.args[0].code()
        return code
    return 0


def confluent_incremental(
    admin: Any, resource_type: int, name: str, *changes: tuple[str, str | None, str]
) -> int:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    kind = ResourceType.TOPIC if resource_type == TOPIC else ResourceType.BROKER
    entries = [
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType[op]) for key, value, op in changes
    ]
    (future,) = admin.incremental_alter_configs(
        [ConfigResource(kind, name, incremental_configs=entries)], request_timeout=TIMEOUT
    ).values()
    return confluent_error(future)


def raw_incremental(
    bootstrap: str, resource_type: int, name: str, *changes: tuple[str, int, str | None]
) -> Any:
    """IncrementalAlterConfigs v1 for one resource: (error_code, error_message)."""
    client = RawClient(bootstrap)
    try:
        configs = [IncrementalConfig(key, op, value) for key, op, value in changes]
        request = IncrementalAlterConfigsRequest([IncrementalResource(resource_type, name, configs)])
        (response,) = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request).responses
        return response.error_code, response.error_message
    finally:
        client.close()


SET, DELETE = 0, 1


def raw_describe(
    bootstrap: str,
    resource_type: int,
    name: str,
    *,
    version: int = 4,
    synonyms: bool = True,
    docs: bool = False,
) -> Any:
    client = RawClient(bootstrap)
    try:
        request = DescribeConfigsRequest([DescribeConfigsResource(resource_type, name, None)], synonyms, docs)
        (result,) = client.request(ApiKey.DESCRIBE_CONFIGS, version, request).results
        return result
    finally:
        client.close()


def stored_codecs(data_dir: Path, topic: str) -> list[Compression]:
    """The codec of every batch in the partition's segment files, read from disk."""
    codecs = []
    for segment in sorted((data_dir / f"{topic}-0").glob("*.log")):
        codecs += [batch.compression for batch in iter_batches(segment.read_bytes())]
    return codecs


# --- topic configs: stored, described --------------------------------------------------------------


CREATED = {
    "compression.type": "gzip",
    "cleanup.policy": "delete,compact",
    "retention.ms": "3600000",
    "min.insync.replicas": "1",
    "segment.jitter.ms": "10",
}


def test_create_topic_configs_are_stored_and_described(broker: BrokerProcess, admin: Any) -> None:
    topic = "cfg-created"
    confluent_create(admin, topic, CREATED)
    entries = confluent_describe(admin, TOPIC, topic)
    assert set(entries) == set(TOPIC_CONFIGS)  # every topic config Kafka has
    for name, value in CREATED.items():
        assert (entries[name].value, int(entries[name].source)) == (value, TOPIC_SOURCE), name
    assert (entries["segment.bytes"].value, int(entries["segment.bytes"].source)) == ("1073741824", DEFAULT)
    assert (entries["remote.storage.enable"].value, entries["remote.storage.enable"].is_default) == (
        "false",
        True,
    )
    # librdkafka asks for synonyms: the override first, then the broker synonyms' defaults.
    retention = entries["retention.ms"].synonyms
    assert [(s.name, s.value, int(s.source)) for s in retention.values()] == [
        ("retention.ms", "3600000", TOPIC_SOURCE),
        ("log.retention.hours", "168", DEFAULT),
    ]
    roll = entries["segment.ms"].synonyms
    assert [(s.name, s.value, int(s.source)) for s in roll.values()] == [("log.roll.hours", "168", DEFAULT)]
    assert not any(e.is_read_only or e.is_sensitive for e in entries.values())


def test_kafka_python_create_and_describe_types(broker: BrokerProcess, kadmin: Any) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    topic = "cfg-kafka-python"
    result = kadmin.create_topics(
        {
            topic: {
                "num_partitions": 1,
                "configs": {"compression.type": "zstd", "cleanup.policy": "compact,delete"},
            }
        }
    )
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [(topic, 0)]
    described = kadmin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic)], include_synonyms=True, config_filter="all"
    )["topic"][topic]
    assert set(described) == set(TOPIC_CONFIGS)
    assert described["compression.type"]["value"] == "zstd"
    assert described["cleanup.policy"]["value"] == "compact,delete"  # the order given
    types = {name: entry["config_type"] for name, entry in described.items()}
    # kafka-python names KIP-569's type codes
    assert types == {name: d.type.name for name, d in TOPIC_CONFIGS.items()}
    assert "UNKNOWN" not in set(types.values())
    assert types["retention.ms"] == "LONG"
    assert types["cleanup.policy"] == "LIST"
    assert types["min.cleanable.dirty.ratio"] == "DOUBLE"
    assert types["preallocate"] == "BOOLEAN"
    assert types["max.message.bytes"] == "INT"
    assert types["compression.type"] == "STRING"


def test_documentation_only_when_asked(broker: BrokerProcess, admin: Any) -> None:
    topic = "cfg-docs"
    confluent_create(admin, topic, {"retention.ms": "5000"})
    with_docs = raw_describe(broker.bootstrap, TOPIC, topic, docs=True)
    assert with_docs.error_code == ErrorCode.NONE
    docs = {c.name: c.documentation for c in with_docs.configs}
    assert docs == {name: d.doc for name, d in TOPIC_CONFIGS.items()}
    assert "deleted" in docs["retention.ms"]
    without = raw_describe(broker.bootstrap, TOPIC, topic, synonyms=False)
    assert {c.documentation for c in without.configs} == {None}
    assert {len(c.synonyms) for c in without.configs} == {0}
    retention = next(c for c in without.configs if c.name == "retention.ms")
    assert (retention.value, retention.config_source, retention.config_type) == ("5000", 1, ConfigType.LONG)


# --- compression.type ----------------------------------------------------------------------------


def produce_uncompressed(bootstrap: str, topic: str) -> list[bytes]:
    """Uncompressed batches from each producing client; the values, in order."""
    from aiokafka import AIOKafkaProducer
    from confluent_kafka import Producer
    from kafka import KafkaProducer

    values = [b"confluent-%d " % i + b"x" * 200 for i in range(20)]
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "none", "linger.ms": 20})
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(TIMEOUT) == 0

    kp_values = [b"kafka-python-%d " % i + b"y" * 200 for i in range(20)]
    kp = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None, linger_ms=20)
    for value in kp_values:
        kp.send(topic, value=value, partition=0)
    kp.flush(TIMEOUT)
    kp.close()

    aio_values = [b"aiokafka-%d " % i + b"z" * 200 for i in range(20)]

    async def aio() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=None, linger_ms=20)
        await producer.start()
        try:
            for value in aio_values:
                await producer.send(topic, value=value, partition=0)
            await producer.flush()
        finally:
            await producer.stop()

    asyncio.run(aio())
    return values + kp_values + aio_values


def test_topic_compression_gzip_recompresses_and_every_client_reads(
    broker: BrokerProcess, admin: Any
) -> None:
    topic = "cfg-gzip"
    confluent_create(admin, topic, {"compression.type": "gzip"})
    values = produce_uncompressed(broker.bootstrap, topic)
    dump = fetch_partition(broker.bootstrap, topic, 0)
    assert dump.values == values
    assert dump.batches
    assert {b.attributes & 0x07 for b in dump.batches} == {Compression.GZIP}
    assert all(b.crc_ok for b in dump.batches)
    on_disk = stored_codecs(broker.data_dir, topic)
    assert on_disk
    assert set(on_disk) == {Compression.GZIP}
    for consume in (consume_confluent, consume_kafka_python, consume_aiokafka):
        got = consume(broker.bootstrap, topic, [len(values)])
        assert [record[2] for record in got[0]] == values, consume.__name__
        assert [record[0] for record in got[0]] == list(range(len(values)))


def test_topic_compression_uncompressed_and_producer(broker: BrokerProcess, admin: Any) -> None:
    from confluent_kafka import Producer

    for topic, setting, expected in (
        ("cfg-uncompressed", "uncompressed", Compression.NONE),
        ("cfg-producer", "producer", Compression.LZ4),
    ):
        confluent_create(admin, topic, {"compression.type": setting})
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "compression.type": "lz4", "linger.ms": 20}
        )
        for i in range(30):
            producer.produce(topic, value=b"v%d" % i * 30, partition=0)
        assert producer.flush(TIMEOUT) == 0
        dump = fetch_partition(broker.bootstrap, topic, 0)
        assert dump.values == [b"v%d" % i * 30 for i in range(30)]
        assert {b.attributes & 0x07 for b in dump.batches} == {expected}, topic


# --- lists ------------------------------------------------------------------------------------------


def test_list_order_kept_and_empty_list_accepted(broker: BrokerProcess, admin: Any, kadmin: Any) -> None:
    topic = "cfg-lists"
    confluent_create(admin, topic, {"cleanup.policy": "delete,compact"})
    assert confluent_describe(admin, TOPIC, topic)["cleanup.policy"].value == "delete,compact"
    assert confluent_incremental(admin, TOPIC, topic, ("cleanup.policy", "", "SET")) == 0
    entry = confluent_describe(admin, TOPIC, topic)["cleanup.policy"]
    assert (entry.value, int(entry.source)) == ("", TOPIC_SOURCE)
    assert confluent_incremental(admin, TOPIC, topic, ("cleanup.policy", "compact", "APPEND")) == 0
    assert confluent_describe(admin, TOPIC, topic)["cleanup.policy"].value == "compact"
    assert confluent_incremental(admin, TOPIC, topic, ("cleanup.policy", "delete", "APPEND")) == 0
    assert confluent_describe(admin, TOPIC, topic)["cleanup.policy"].value == "compact,delete"
    # APPEND on a config that is not a list: INVALID_CONFIG, nothing changed.
    code = confluent_incremental(admin, TOPIC, topic, ("retention.ms", "5", "APPEND"))
    assert code == ErrorCode.INVALID_CONFIG
    assert confluent_describe(admin, TOPIC, topic)["retention.ms"].value == "604800000"


# --- the broker resource ----------------------------------------------------------------------------


def test_broker_resource_lists_every_broker_config(broker: BrokerProcess, admin: Any, kadmin: Any) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    entries = confluent_describe(admin, BROKER, "0")
    assert set(entries) == set(BROKER_CONFIGS)
    assert entries["advertised.listeners"].value == f"PLAINTEXT://127.0.0.1:{broker.port}"
    assert entries["listeners"].value == f"PLAINTEXT://127.0.0.1:{broker.port}"
    assert int(entries["listeners"].source) == ConfigSource.STATIC_BROKER_CONFIG  # --listen
    assert entries["log.dirs"].value == str(broker.data_dir)
    assert entries["node.id"].is_read_only
    assert not entries["log.retention.ms"].is_read_only
    assert not entries["num.io.threads"].is_read_only
    assert (entries["log.retention.hours"].value, int(entries["log.retention.hours"].source)) == (
        "168",
        DEFAULT,
    )
    assert entries["log.retention.ms"].value is None  # unset, as in Kafka
    assert [(s.name, s.value) for s in entries["log.retention.ms"].synonyms.values()] == [
        ("log.retention.hours", "168")
    ]
    described = kadmin.describe_configs(
        [ConfigResource(ConfigResourceType.BROKER, "0")], include_synonyms=True, config_filter="all"
    )["broker"]["0"]
    assert set(described) == set(BROKER_CONFIGS)
    assert described["num.partitions"]["config_type"] == "INT"
    assert described["auto.create.topics.enable"]["config_type"] == "BOOLEAN"
    assert described["log.cleanup.policy"]["config_type"] == "LIST"
    assert described["node.id"]["read_only"] is True
    assert "UNKNOWN" not in {e["config_type"] for e in described.values()}
    # another broker id: Kafka's INVALID_REQUEST
    assert raw_describe(broker.bootstrap, BROKER, "7").error_code == ErrorCode.INVALID_REQUEST


def test_read_only_and_invalid_broker_changes_are_refused(broker: BrokerProcess, admin: Any) -> None:
    client = RawClient(broker.bootstrap)
    try:

        def alter(name: str, *changes: tuple[str, str]) -> tuple[int, str | None]:
            request = IncrementalAlterConfigsRequest(
                [IncrementalResource(BROKER, name, [IncrementalConfig(k, 0, v) for k, v in changes])]
            )
            (response,) = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request).responses
            return response.error_code, response.error_message

        code, message = alter("0", ("log.retention.ms", "1000"), ("listeners", "PLAINTEXT://1.2.3.4:1"))
        assert code == ErrorCode.INVALID_CONFIG
        assert message == "Cannot update these configs dynamically: Set(listeners)"
        code, message = alter("0", ("log.retention.ms", "soon"))
        assert code == ErrorCode.INVALID_CONFIG
        assert "log.retention.ms" in (message or "")
        assert alter("0", ("no.such.config", "1"))[0] == ErrorCode.INVALID_CONFIG
        assert alter("3", ("log.retention.ms", "1"))[0] == ErrorCode.INVALID_REQUEST
    finally:
        client.close()
    # nothing was applied
    entry = confluent_describe(admin, BROKER, "0")["log.retention.ms"]
    assert (entry.value, int(entry.source)) == (None, DEFAULT)


def test_kafka_only_broker_configs_are_accepted_as_kafka_does(
    broker: BrokerProcess, admin: Any, kadmin: Any
) -> None:
    """Configs of Kafka 4 exactly does not act on (Kerberos, KRaft, ...) change as Kafka's do."""
    from kafka.admin import ConfigResource, ConfigResourceType

    kerberos = "sasl.kerberos.min.time.before.relogin"
    assert confluent_incremental(admin, BROKER, "0", (kerberos, "120000", "SET")) == 0
    entry = confluent_describe(admin, BROKER, "0")[kerberos]
    assert (entry.value, int(entry.source), entry.is_read_only) == (
        "120000",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        False,
    )
    # a per-broker config cannot be the cluster default; a cluster-wide one can
    code, message = raw_incremental(broker.bootstrap, BROKER, "", (kerberos, SET, "1"))
    assert (code, message) == (
        ErrorCode.INVALID_CONFIG,
        f"Cannot update these configs at default cluster level, broker id must be specified: Set({kerberos})",
    )
    assert raw_incremental(broker.bootstrap, BROKER, "", ("remote.log.reader.threads", SET, "4"))[0] == 0
    # read-only in Kafka too, and Kafka's validators
    assert raw_incremental(broker.bootstrap, BROKER, "0", ("process.roles", SET, "broker")) == (
        ErrorCode.INVALID_CONFIG,
        "Cannot update these configs dynamically: Set(process.roles)",
    )
    assert (
        raw_incremental(broker.bootstrap, BROKER, "0", (kerberos, SET, "soon"))[0] == ErrorCode.INVALID_CONFIG
    )
    # kafka-python, which checks the key against DescribeConfigs first, then the legacy AlterConfigs
    jitter = ConfigResource(
        ConfigResourceType.BROKER, "0", configs={"sasl.kerberos.ticket.renew.jitter": "0.1"}
    )
    assert kadmin.alter_configs([jitter]) == {"broker": {"0": "OK"}}
    assert kadmin.alter_configs([jitter], incremental=False) == {"broker": {"0": "OK"}}
    described = confluent_describe(admin, BROKER, "0")
    assert described["sasl.kerberos.ticket.renew.jitter"].value == "0.1"
    assert described[kerberos].value == "120000"  # kafka-python re-sent it
    assert (
        raw_incremental(broker.bootstrap, BROKER, "0", ("sasl.kerberos.ticket.renew.jitter", DELETE, None))[0]
        == 0
    )
    assert raw_incremental(broker.bootstrap, BROKER, "", ("remote.log.reader.threads", DELETE, None))[0] == 0
    assert raw_incremental(broker.bootstrap, BROKER, "0", (kerberos, DELETE, None))[0] == 0


def test_list_config_resources(broker: BrokerProcess, admin: Any, kadmin: Any) -> None:
    """ListConfigResources (key 74, KIP-1142): every topic, the broker (and its loggers)."""
    confluent_create(admin, "cfg-listed", {})
    listed = kadmin.list_config_resources()
    assert "cfg-listed" in listed["topic"]
    assert (listed["broker"], listed["broker_logger"]) == (["0"], ["0"])
    assert "group" not in listed
    assert "client_metrics" not in listed
    assert kadmin.list_config_resources(["BROKER"]) == {"broker": ["0"]}
    client = RawClient(broker.bootstrap)
    try:
        # v0 is ListClientMetricsResources: none here; an unknown type: UNSUPPORTED_VERSION
        v0 = client.request(ApiKey.LIST_CONFIG_RESOURCES, 0, ListConfigResourcesRequest())
        assert (v0.error_code, v0.config_resources) == (ErrorCode.NONE, [])
        bad = client.request(ApiKey.LIST_CONFIG_RESOURCES, 1, ListConfigResourcesRequest([2, 99]))
        assert (bad.error_code, bad.config_resources) == (ErrorCode.UNSUPPORTED_VERSION, [])
    finally:
        client.close()


def test_broker_logger_levels_change_at_run_time(broker: BrokerProcess, kadmin: Any) -> None:
    """BROKER_LOGGER (type 8), as `kafka-configs.sh --entity-type broker-loggers` uses it."""
    from kafka.admin import ConfigResource, ConfigResourceType

    name = "exactly.broker.handlers.incremental_alter_configs"  # it logs every change of a level

    def levels() -> dict[str, Any]:
        resource = ConfigResource(ConfigResourceType.BROKER_LOGGER, "0")
        described: dict[str, Any] = kadmin.describe_configs([resource], config_filter="all")["broker_logger"][
            "0"
        ]
        return described

    def change(op: str, level: str | None) -> Any:
        configs = {name: (op, level)}
        return kadmin.alter_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, "0", configs=configs)])

    described = levels()
    assert described["root"]["value"] == "INFO"
    assert described[name]["value"] == "INFO"
    assert described[name]["config_source"] == "DYNAMIC_BROKER_LOGGER_CONFIG"
    assert change("SET", "DEBUG") == {"broker_logger": {"0": "OK"}}
    assert levels()[name]["value"] == "DEBUG"
    assert change("SET", "WARN") == {"broker_logger": {"0": "OK"}}  # not logged: the logger is at WARN now
    assert change("DELETE", None) == {"broker_logger": {"0": "OK"}}  # back to INFO, inherited: logged
    assert levels()[name]["value"] == "INFO"
    deadline = time.monotonic() + TIMEOUT

    def changes_logged() -> list[str]:
        return [x for x in broker.full_log().splitlines() if "logger levels changed" in x]

    while len(lines := changes_logged()) < 2:
        assert time.monotonic() < deadline, broker.log()
        time.sleep(0.05)
    assert ["'DEBUG'" in lines[0], "None" in lines[1]] == [True, True]
    assert not any("'WARN'" in line for line in lines)
    # Kafka's refusals, per resource
    code, message = raw_incremental(broker.bootstrap, 8, "0", ("no.such.logger", SET, "INFO"))
    assert (code, message) == (ErrorCode.INVALID_CONFIG, "Logger no.such.logger does not exist!")
    assert raw_incremental(broker.bootstrap, 8, "0", ("root", DELETE, None))[0] == ErrorCode.INVALID_REQUEST
    assert raw_incremental(broker.bootstrap, 8, "0", ("root", SET, "LOUD"))[0] == ErrorCode.INVALID_CONFIG
    assert raw_incremental(broker.bootstrap, 8, "", ("root", SET, "INFO"))[0] == ErrorCode.INVALID_REQUEST
    assert raw_describe(broker.bootstrap, 8, "1").error_code == ErrorCode.INVALID_REQUEST


def test_fetch_below_v10_of_a_zstd_topic_is_unsupported_compression_type(
    broker: BrokerProcess, admin: Any
) -> None:
    """KIP-110, as Kafka's `maybeConvertFetchedData`: by the topic's compression.type, not its batches."""
    confluent_create(admin, "cfg-zstd", {"compression.type": "zstd"})
    confluent_create(admin, "cfg-producer-codec", {})
    client = RawClient(broker.bootstrap)
    try:

        def code(topic: str, version: int) -> int:
            request = FetchRequest(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=1 << 20,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=[FetchTopic(topic, partitions=[FetchPartition(0, -1, 0, -1, -1, 1 << 20)])],
            )
            (partition,) = client.request(ApiKey.FETCH, version, request).responses[0].partitions
            return int(partition.error_code)

        assert [code("cfg-zstd", v) for v in (4, 9, 10, 12)] == [
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            ErrorCode.NONE,
            ErrorCode.NONE,
        ]
        assert code("cfg-producer-codec", 9) == ErrorCode.NONE
    finally:
        client.close()


# --- legacy AlterConfigs -----------------------------------------------------------------------------


def test_legacy_alter_configs_aiokafka_replaces_overrides(broker: BrokerProcess, admin: Any) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    topic = "cfg-legacy-aiokafka"
    confluent_create(admin, topic, {"segment.bytes": "2000000", "retention.ms": "100000"})

    async def alter(configs: dict[str, str]) -> list[tuple[int, str]]:
        client = AIOKafkaAdminClient(
            bootstrap_servers=broker.bootstrap, request_timeout_ms=int(TIMEOUT * 1000)
        )
        await client.start()
        try:
            responses = await client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs)])
            return [(r[0], r[3]) for response in responses for r in response.resources]
        finally:
            await client.close()

    assert asyncio.run(alter({"retention.ms": "5000", "compression.type": "snappy"})) == [(0, topic)]
    entries = confluent_describe(admin, TOPIC, topic)
    assert (entries["retention.ms"].value, int(entries["retention.ms"].source)) == ("5000", TOPIC_SOURCE)
    assert entries["compression.type"].value == "snappy"
    # segment.bytes was not in the request: the legacy API replaced it with the default
    assert (entries["segment.bytes"].value, int(entries["segment.bytes"].source)) == ("1073741824", DEFAULT)
    assert asyncio.run(alter({"retention.ms": "later"})) == [(ErrorCode.INVALID_CONFIG, topic)]
    assert confluent_describe(admin, TOPIC, topic)["retention.ms"].value == "5000"

    async def describe() -> dict[str, tuple[str, int, list[tuple[str, str, int]]]]:
        client = AIOKafkaAdminClient(
            bootstrap_servers=broker.bootstrap, request_timeout_ms=int(TIMEOUT * 1000)
        )
        await client.start()
        try:
            (response,) = await client.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic)], include_synonyms=True
            )
            ((error, _message, _type, _name, entries),) = response.resources
            assert error == 0
            return {e[0]: (e[1], e[3], [tuple(s) for s in e[5]]) for e in entries}
        finally:
            await client.close()

    described = asyncio.run(describe())  # DescribeConfigs v1/v2, the versions aiokafka speaks
    assert set(described) == set(TOPIC_CONFIGS)
    assert described["retention.ms"] == (
        "5000",
        TOPIC_SOURCE,
        [("retention.ms", "5000", TOPIC_SOURCE), ("log.retention.hours", "168", DEFAULT)],
    )
    assert described["compression.type"][:2] == ("snappy", TOPIC_SOURCE)


def test_legacy_alter_configs_kafka_python_and_validate_only(
    broker: BrokerProcess, admin: Any, kadmin: Any
) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    topic = "cfg-legacy-kafka-python"
    confluent_create(admin, topic, {"max.message.bytes": "5000"})
    resource = ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.bytes": "123456"})
    assert kadmin.alter_configs([resource], validate_only=True, incremental=False) == {"topic": {topic: "OK"}}
    assert confluent_describe(admin, TOPIC, topic)["max.message.bytes"].value == "5000"
    assert (
        "retention.bytes"
        not in kadmin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
    )
    assert kadmin.alter_configs([resource], incremental=False) == {"topic": {topic: "OK"}}
    entries = confluent_describe(admin, TOPIC, topic)
    assert entries["retention.bytes"].value == "123456"
    # kafka-python's non-incremental mode re-sends the other overrides it described (client side)
    assert (entries["max.message.bytes"].value, int(entries["max.message.bytes"].source)) == (
        "5000",
        TOPIC_SOURCE,
    )
    bad = ConfigResource(ConfigResourceType.TOPIC, topic, configs={"compression.type": "brotli"})
    result = kadmin.alter_configs([bad], raise_on_unknown=False, incremental=False)
    assert "[Error 40] InvalidConfigurationError" in str(result["topic"][topic])
    # raw v2: unknown topic, and the broker resource through the legacy API
    client = RawClient(broker.bootstrap)
    try:
        request = AlterConfigsRequest(
            [
                AlterConfigsResource(TOPIC, "cfg-no-such-topic", [AlterableConfig("retention.ms", "1")]),
                AlterConfigsResource(BROKER, "0", [AlterableConfig("num.io.threads", "16")]),
            ]
        )
        responses = client.request(ApiKey.ALTER_CONFIGS, 2, request).responses
        assert [(r.resource_name, r.error_code) for r in responses] == [
            ("cfg-no-such-topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            ("0", ErrorCode.NONE),
        ]
    finally:
        client.close()
    entry = confluent_describe(admin, BROKER, "0")["num.io.threads"]
    assert (entry.value, int(entry.source)) == ("16", ConfigSource.DYNAMIC_BROKER_CONFIG)


def test_invalid_topic_values_get_invalid_config(broker: BrokerProcess, admin: Any) -> None:
    from confluent_kafka.admin import NewTopic

    futures = admin.create_topics(
        [
            NewTopic("cfg-bad-codec", 1, 1, config={"compression.type": "brotli"}),
            NewTopic("cfg-bad-level", 1, 1, config={"compression.zstd.level": "99"}),
            NewTopic("cfg-bad-ratio", 1, 1, config={"min.cleanable.dirty.ratio": "2"}),
            NewTopic("cfg-removed", 1, 1, config={"message.format.version": "3.0"}),
            NewTopic("cfg-bad-bool", 1, 1, config={"preallocate": "maybe"}),
        ],
        request_timeout=TIMEOUT,
    )
    assert {name: confluent_error(f) for name, f in futures.items()} == {
        "cfg-bad-codec": ErrorCode.INVALID_CONFIG,
        "cfg-bad-level": ErrorCode.INVALID_CONFIG,
        "cfg-bad-ratio": ErrorCode.INVALID_CONFIG,
        "cfg-removed": ErrorCode.INVALID_CONFIG,
        "cfg-bad-bool": ErrorCode.INVALID_CONFIG,
    }
    assert not set(futures) & set(admin.list_topics(timeout=TIMEOUT).topics)


# --- run-time broker configs: changed, effective, persisted --------------------------------------------


def wait_for(condition: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_dynamic_broker_config_takes_effect_and_persists(tmp_path: Path) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    with running_broker(tmp_path / "data", "log.retention.check.interval.ms=100") as proc:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        confluent_create(admin, "dyn-default", {"segment.bytes": "2000"})
        confluent_create(admin, "dyn-own", {"segment.bytes": "2000", "retention.ms": "604800000"})
        old = int(time.time() * 1000) - 3_600_000  # an hour ago: kept by the 7-day default
        producer = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 0})
        for topic in ("dyn-default", "dyn-own"):
            for i in range(20):
                producer.produce(topic, value=b"%d" % i * 100, partition=0, timestamp=old + i)
                assert producer.flush(TIMEOUT) == 0
        assert list_offset(proc.bootstrap, "dyn-default", 0, EARLIEST)[1] == 0

        # cluster-wide default, then this broker's own value over it
        # the cluster-wide default (librdkafka cannot name the "" resource)
        assert raw_incremental(proc.bootstrap, BROKER, "", ("log.retention.ms", SET, "86400000")) == (0, None)
        entry = confluent_describe(admin, TOPIC, "dyn-default")["retention.ms"]
        assert (entry.value, int(entry.source)) == ("86400000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        # this broker's own value; log.retention.ms (from any layer) still outranks log.retention.minutes
        assert confluent_incremental(admin, BROKER, "0", ("log.retention.minutes", "1", "SET")) == 0
        assert confluent_incremental(admin, BROKER, "0", ("num.io.threads", "4", "SET")) == 0
        assert confluent_describe(admin, TOPIC, "dyn-default")["retention.ms"].value == "86400000"
        assert raw_incremental(proc.bootstrap, BROKER, "", ("log.retention.ms", DELETE, None)) == (0, None)
        entry = confluent_describe(admin, TOPIC, "dyn-default")["retention.ms"]
        assert (entry.value, int(entry.source)) == ("60000", ConfigSource.DYNAMIC_BROKER_CONFIG)
        assert [(s.name, s.value, int(s.source)) for s in entry.synonyms.values()] == [
            ("log.retention.minutes", "1", ConfigSource.DYNAMIC_BROKER_CONFIG),
            ("log.retention.hours", "168", DEFAULT),
        ]

        # effective: the topic without its own retention.ms loses its hour-old segments, the other keeps them
        wait_for(lambda: list_offset(proc.bootstrap, "dyn-default", 0, EARLIEST)[1] > 0, "retention")
        assert list_offset(proc.bootstrap, "dyn-own", 0, EARLIEST)[1] == 0

        proc.restart()
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        entries = confluent_describe(admin, BROKER, "0")
        assert (entries["log.retention.minutes"].value, int(entries["log.retention.minutes"].source)) == (
            "1",
            ConfigSource.DYNAMIC_BROKER_CONFIG,
        )
        assert (entries["num.io.threads"].value, int(entries["num.io.threads"].source)) == (
            "4",
            ConfigSource.DYNAMIC_BROKER_CONFIG,
        )
        assert entries["log.retention.ms"].value is None
        assert confluent_describe(admin, TOPIC, "dyn-default")["retention.ms"].value == "60000"
        cluster_default = raw_describe(proc.bootstrap, BROKER, "")
        assert cluster_default.error_code == ErrorCode.NONE
        assert cluster_default.configs == []  # the cluster-wide layer was emptied again
        assert confluent_describe(admin, TOPIC, "dyn-own")["retention.ms"].value == "604800000"


def test_create_topics_v5_answers_the_new_topics_configs(broker: BrokerProcess) -> None:
    from exactly.protocol.messages.create_topics import (
        CreatableTopic,
        CreatableTopicConfig,
        CreateTopicsRequest,
    )

    client = RawClient(broker.bootstrap)
    try:
        topic = CreatableTopic("cfg-create-v7", 1, 1, [], [CreatableTopicConfig("compression.type", "lz4")])
        (result,) = client.request(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest([topic], 10_000)).topics
    finally:
        client.close()
    assert result.error_code == ErrorCode.NONE
    configs = {c.name: (c.value, c.config_source, c.read_only) for c in result.configs or []}
    assert set(configs) == set(TOPIC_CONFIGS)
    assert configs["compression.type"] == ("lz4", TOPIC_SOURCE, False)
    assert configs["retention.ms"] == ("604800000", DEFAULT, False)
