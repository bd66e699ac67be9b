"""Client quotas and dynamic broker configs in a replicated cluster: three real brokers on one real
ZooKeeper. A quota or a run-time broker config set through one broker is in ZooKeeper, in Kafka's layout
(`/config/clients/<c>`, `/config/users/<u>`, `/config/brokers/<default>`, a `/config/changes`
notification), and takes effect on every broker; a per-broker config only on its broker; a user's quota
and SCRAM credentials share its znode.

One cluster for the module; its brokers measure quotas over 2 windows of 1 s, so that a client is
throttled after about a second's worth of its quota.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient

from exactly.configs import ConfigSource
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from exactly.protocol.messages.describe_client_quotas import ComponentData, DescribeClientQuotasRequest
from exactly.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from exactly.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from exactly.records.builder import BatchBuilder
from exactly.testing.cluster import ClusterProcesses
from exactly.testing.zookeeper import ZooKeeperProcess
from tests.interop import cluster_support as cs
from tests.interop.client import RawClient

pytestmark = pytest.mark.slow

BROKER, SET, DELETE = 4, 0, 1
SPECIFIED = 2
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def cluster(
    zookeeper_server: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterProcesses]:
    connect = f"{zookeeper_server.connect_string}/configs-{uuid.uuid4().hex[:8]}"
    with ClusterProcesses(
        tmp_path_factory.mktemp("cluster-configs"),
        connect,
        3,
        "quota.window.num=2",
        "quota.window.size.seconds=1",
    ) as c:
        yield c


@pytest.fixture(scope="module")
def zk(cluster: ClusterProcesses) -> Iterator[KazooClient]:
    client = KazooClient(hosts=cluster.zookeeper_connect)  # the cluster's chroot
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


def until(condition: Callable[[], object], what: str, timeout: float = TIMEOUT) -> None:
    """Any error while waiting counts as not yet (a view that does not show the change yet)."""
    cs.until(condition, timeout, what, retry_on=(Exception,))


def request(cluster: ClusterProcesses, broker_id: int, api: ApiKey, version: int, body: Any) -> Any:
    client = RawClient(cluster.brokers[broker_id].bootstrap, client_id="config-admin")
    try:
        return client.request(api, version, body)
    finally:
        client.close()


def znode(zk: KazooClient, path: str) -> Any:
    data, _ = zk.get(path)
    return json.loads(data)


def notified(zk: KazooClient, entity_path: str) -> bool:
    return any(
        json.loads(zk.get(f"/config/changes/{c}")[0]) == {"version": 2, "entity_path": entity_path}
        for c in zk.get_children("/config/changes")
    )


# --- quotas ---------------------------------------------------------------------------------------------


def alter_quota(
    cluster: ClusterProcesses, broker_id: int, entity: dict[str, str | None], **ops: float
) -> None:
    entry = EntryData(
        [EntityData(t, n) for t, n in entity.items()], [OpData(k, v, False) for k, v in ops.items()]
    )
    response = request(cluster, broker_id, ApiKey.ALTER_CLIENT_QUOTAS, 1, AlterClientQuotasRequest([entry]))
    assert [(e.error_code, e.error_message) for e in response.entries] == [(ErrorCode.NONE, None)]


def described_quotas(
    cluster: ClusterProcesses, broker_id: int, entity_type: str
) -> dict[Any, dict[str, float]]:
    body = DescribeClientQuotasRequest([ComponentData(entity_type, SPECIFIED, None)], False)
    response = request(cluster, broker_id, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, body)
    assert response.error_code == ErrorCode.NONE
    return {
        tuple((e.entity_type, e.entity_name) for e in item.entity): {v.key: v.value for v in item.values}
        for item in response.entries
    }


def create_topic(cluster: ClusterProcesses, name: str, replicas: list[int]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = NewTopic(name, 1, replica_assignment=[replicas])
    for future in admin.create_topics([topic]).values():
        future.result(TIMEOUT)

    def led() -> bool:
        metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(name, timeout=5)
        return metadata.topics[name].partitions[0].leader == replicas[0]

    until(led, f"{name} led by broker {replicas[0]}")


def produce(client: RawClient, topic: str, size: int) -> Any:
    builder = BatchBuilder()
    builder.append(int(time.time() * 1000), None, b"q" * size, [])
    body = ProduceRequest(
        None, 1, 10_000, [TopicProduceData(topic, partition_data=[PartitionProduceData(0, builder.build())])]
    )
    response = client.request(ApiKey.PRODUCE, 9, body)
    (partition,) = response.responses[0].partition_responses
    return response.throttle_time_ms, partition.error_code


def test_a_quota_set_through_one_broker_throttles_on_another(
    cluster: ClusterProcesses, zk: KazooClient
) -> None:
    create_topic(cluster, "quota-t", [2, 1, 3])
    alter_quota(cluster, 1, {"client-id": "slow"}, producer_byte_rate=20_000.0)
    # Kafka's layout, and a change notification for it
    assert znode(zk, "/config/clients/slow") == {"version": 1, "config": {"producer_byte_rate": "20000"}}
    assert notified(zk, "clients/slow")
    until(
        lambda: (
            described_quotas(cluster, 3, "client-id").get((("client-id", "slow"),))
            == {"producer_byte_rate": 20_000.0}
        ),
        "the quota in DescribeClientQuotas on broker 3",
    )

    def throttled(client_id: str, requests: int) -> list[int]:
        """The throttle times of `requests` produce requests of 10 KB to broker 2 (which leads quota-t)."""
        client = RawClient(cluster.brokers[2].bootstrap, timeout=30, client_id=client_id)
        try:
            out = []
            for _ in range(requests):
                throttle, error = produce(client, "quota-t", 10_000)
                assert error == ErrorCode.NONE
                out.append(throttle)
                if throttle > 0:
                    break
            return out
        finally:
            client.close()

    # 20 KB/s over 2 s windows: throttled after about 40 KB, long before 200 KB
    until(lambda: throttled("slow", 20)[-1] > 0, "broker 2 to throttle the client 'slow'")
    assert all(t == 0 for t in throttled("fast", 20))  # a client without a quota is not


def test_a_users_quota_and_scram_credentials_share_its_znode(
    cluster: ClusterProcesses, zk: KazooClient
) -> None:
    user = "carol@example"
    path = "/config/users/carol%40example"
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})

    def upsert(mechanism: ScramMechanism) -> None:
        info = ScramCredentialInfo(mechanism, 4096)
        upsertion = UserScramCredentialUpsertion(user, info, b"secret", b"salt-salt")
        for future in admin.alter_user_scram_credentials([upsertion]).values():
            future.result(TIMEOUT)

    upsert(ScramMechanism.SCRAM_SHA_256)
    alter_quota(cluster, 2, {"user": user}, producer_byte_rate=1_000_000.0, request_percentage=50.0)
    config = znode(zk, path)["config"]
    assert config["producer_byte_rate"] == "1000000"
    assert config["request_percentage"] == "50.0"
    assert config["SCRAM-SHA-256"].startswith("salt=")
    upsert(ScramMechanism.SCRAM_SHA_512)  # the quota stays
    config = znode(zk, path)["config"]
    assert set(config) == {"SCRAM-SHA-256", "SCRAM-SHA-512", "producer_byte_rate", "request_percentage"}
    assert notified(zk, "users/carol%40example")
    until(
        lambda: (
            described_quotas(cluster, 3, "user").get((("user", user),))
            == {"producer_byte_rate": 1_000_000.0, "request_percentage": 50.0}
        ),
        "the user's quota on broker 3",
    )
    admin3 = AdminClient({"bootstrap.servers": cluster.brokers[3].bootstrap})  # kept until resolved
    described = admin3.describe_user_scram_credentials([user])
    mechanisms = {info.mechanism for info in described[user].result(TIMEOUT).scram_credential_infos}
    assert mechanisms == {ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512}
    # a user + client-id quota is a child znode, and a default user is <default>
    alter_quota(cluster, 3, {"user": None, "client-id": "app"}, consumer_byte_rate=4096.0)
    assert znode(zk, "/config/users/<default>/clients/app") == {
        "version": 1,
        "config": {"consumer_byte_rate": "4096"},
    }
    until(
        lambda: (
            described_quotas(cluster, 1, "client-id").get((("client-id", "app"), ("user", None)))
            == {"consumer_byte_rate": 4096.0}
        ),
        "the user-default + client quota on broker 1",
    )


# --- dynamic broker configs -----------------------------------------------------------------------------


def alter_broker(
    cluster: ClusterProcesses, via: int, name: str, key: str, op: int, value: str | None
) -> None:
    body = IncrementalAlterConfigsRequest(
        [AlterConfigsResource(BROKER, name, [AlterableConfig(key, op, value)])]
    )
    (response,) = request(cluster, via, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body).responses
    assert (response.error_code, response.error_message) == (ErrorCode.NONE, None)


def broker_config(cluster: ClusterProcesses, broker_id: int, name: str, key: str) -> tuple[str | None, int]:
    """(value, source) of `key` in DescribeConfigs of BROKER `name` on broker `broker_id`."""
    body = DescribeConfigsRequest([DescribeConfigsResource(BROKER, name, [key])], False, False)
    (result,) = request(cluster, broker_id, ApiKey.DESCRIBE_CONFIGS, 4, body).results
    assert result.error_code == ErrorCode.NONE, result.error_message
    (entry,) = [c for c in result.configs if c.name == key] or [None]
    return (entry.value, entry.config_source) if entry is not None else (None, -1)


def test_a_cluster_default_broker_config_applies_on_every_broker(
    cluster: ClusterProcesses, zk: KazooClient
) -> None:
    create_topic(cluster, "config-t3", [3, 1, 2])
    create_topic(cluster, "config-t2", [2, 3, 1])
    alter_broker(cluster, 1, "", "message.max.bytes", SET, "3000")
    assert znode(zk, "/config/brokers/<default>") == {"version": 1, "config": {"message.max.bytes": "3000"}}
    assert notified(zk, "brokers/<default>")
    default = ("3000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    until(lambda: broker_config(cluster, 3, "3", "message.max.bytes") == default, "the default on broker 3")
    assert broker_config(cluster, 3, "", "message.max.bytes") == default

    def refused(broker_id: int, topic: str) -> bool:
        client = RawClient(cluster.brokers[broker_id].bootstrap, client_id="big")
        try:
            return bool(produce(client, topic, 5000)[1] == ErrorCode.MESSAGE_TOO_LARGE)
        finally:
            client.close()

    until(lambda: refused(3, "config-t3"), "broker 3 to refuse a 5000-byte batch")
    until(lambda: refused(2, "config-t2"), "broker 2 to refuse a 5000-byte batch")

    # broker 3's own value applies to broker 3 only
    alter_broker(cluster, 3, "3", "message.max.bytes", SET, "100000")
    assert znode(zk, "/config/brokers/3") == {"version": 1, "config": {"message.max.bytes": "100000"}}
    assert notified(zk, "brokers/3")
    assert broker_config(cluster, 3, "3", "message.max.bytes") == (
        "100000",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    assert not refused(3, "config-t3")
    assert broker_config(cluster, 2, "2", "message.max.bytes") == default
    assert refused(2, "config-t2")

    # written to ZooKeeper by a tool (kafka-configs --zookeeper): reaches its broker through the notification
    zk.create("/config/brokers/2", b'{"version":1,"config":{"log.cleaner.backoff.ms":"1234"}}')
    zk.create("/config/changes/config_change_", b'{"version":2,"entity_path":"brokers/2"}', sequence=True)
    until(
        lambda: (
            broker_config(cluster, 2, "2", "log.cleaner.backoff.ms")
            == ("1234", ConfigSource.DYNAMIC_BROKER_CONFIG)
        ),
        "broker 2 to apply its config from ZooKeeper",
    )
    assert broker_config(cluster, 1, "1", "log.cleaner.backoff.ms")[1] != ConfigSource.DYNAMIC_BROKER_CONFIG

    # back to the defaults
    alter_broker(cluster, 2, "", "message.max.bytes", DELETE, None)
    alter_broker(cluster, 3, "3", "message.max.bytes", DELETE, None)
    until(lambda: not refused(2, "config-t2"), "broker 2 to accept a 5000-byte batch again")
    assert znode(zk, "/config/brokers/<default>") == {"version": 1, "config": {}}
