"""The ZooKeeper codec of a cluster's client quotas and dynamic broker configs: Kafka's literal paths and
values, round trips, and malformed input."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.cluster import config_znodes as cz
from exactly.cluster.znodes import ConfigChangeNotification, EntityConfig, ZnodeFormatError
from exactly.quotas.entities import CLIENT_ID, IP, USER, make_entity


@pytest.mark.parametrize(
    ("pairs", "entity_path", "znode"),
    [
        ([(USER, "alice")], "users/alice", "/config/users/alice"),
        ([(USER, None)], "users/<default>", "/config/users/<default>"),
        ([(CLIENT_ID, "app-1")], "clients/app-1", "/config/clients/app-1"),
        ([(CLIENT_ID, None)], "clients/<default>", "/config/clients/<default>"),
        (
            [(USER, "a@b c"), (CLIENT_ID, "x*")],
            "users/a%40b%20c/clients/x%2A",
            "/config/users/a%40b%20c/clients/x%2A",
        ),
        ([(USER, None), (CLIENT_ID, None)], "users/<default>/clients/<default>", None),
        ([(IP, "10.0.0.1")], "ips/10.0.0.1", "/config/ips/10.0.0.1"),
        ([(IP, None)], "ips/<default>", "/config/ips/<default>"),
    ],
)
def test_kafka_quota_paths(pairs: list[tuple[str, str | None]], entity_path: str, znode: str | None) -> None:
    entity = make_entity(pairs)
    assert cz.quota_entity_path(entity) == entity_path
    assert cz.quota_config_path(entity) == (znode or f"/config/{entity_path}")
    assert cz.quota_entity_of(entity_path) == entity


def test_other_entities_are_not_quotas() -> None:
    assert cz.quota_entity_of("topics/orders") is None
    assert cz.quota_entity_of("brokers/1") is None
    with pytest.raises(ValueError):
        cz.quota_entity_path(make_entity([(IP, "1.2.3.4"), (USER, "u")]))
    with pytest.raises(ValueError):
        cz.quota_entity_path(())


@pytest.mark.parametrize(
    "entity_path",
    ["users/", "users/a/b", "users/a/clients", "users/a/clients/", "clients/a/b", "ips/", "users/%FF"],
)
def test_malformed_quota_entity_paths(entity_path: str) -> None:
    with pytest.raises(ZnodeFormatError):
        cz.quota_entity_of(entity_path)


def test_kafka_quota_znode_bytes() -> None:
    # Kafka's ZkAdminManager: longs as integers, doubles as Java's Double.toString; SCRAM keys kept
    config = cz.with_quotas(
        {"SCRAM-SHA-256": "salt=YQ==,stored_key=Yg==,server_key=Yw==,iterations=4096"},
        {"producer_byte_rate": 1024.0, "request_percentage": 50.0, "controller_mutation_rate": 1e7},
    )
    assert EntityConfig(config).encode() == (
        b'{"version":1,"config":{"SCRAM-SHA-256":"salt=YQ==,stored_key=Yg==,server_key=Yw==,iterations=4096",'
        b'"producer_byte_rate":"1024","request_percentage":"50.0","controller_mutation_rate":"1.0E7"}}'
    )
    read = EntityConfig.decode(b'{"version":1,"config":{"consumer_byte_rate":"2048","SCRAM-SHA-512":"x"}}')
    assert cz.decode_quota_values(read.configs) == {"consumer_byte_rate": 2048.0}
    assert cz.with_quotas(config, {"producer_byte_rate": None, "request_percentage": None, "nope": None}) == {
        "SCRAM-SHA-256": config["SCRAM-SHA-256"],
        "controller_mutation_rate": "1.0E7",
    }
    assert cz.decode_quota_values({"request_percentage": "1.5E-4"}) == {"request_percentage": 1.5e-4}


@pytest.mark.parametrize("text", ["", "fast", "1,5", "NaN", "Infinity", "inf", "1e999"])
def test_malformed_quota_values(text: str) -> None:
    with pytest.raises(ZnodeFormatError):
        cz.decode_quota_values({"producer_byte_rate": text})


@pytest.mark.parametrize(
    ("value", "java"),
    [
        (50.0, "50.0"),
        (0.001, "0.001"),
        (1234567.5, "1234567.5"),
        (9999999.0, "9999999.0"),
        (1e7, "1.0E7"),
        (1.5e-4, "1.5E-4"),
        (1.2345e20, "1.2345E20"),
        (-2.5e-10, "-2.5E-10"),
        (0.0, "0.0"),
    ],
)
def test_java_double_to_string(value: float, java: str) -> None:
    assert cz.java_double(value) == java


finite = st.floats(allow_nan=False, allow_infinity=False)


@given(finite)
def test_java_doubles_read_back(value: float) -> None:
    assert float(cz.java_double(value)) == value


names = st.one_of(st.none(), st.text(min_size=1, max_size=20))
ips = st.one_of(st.none(), st.ip_addresses().map(str))


@given(
    st.one_of(
        st.tuples(names).map(lambda t: make_entity([(USER, t[0])])),
        st.tuples(names).map(lambda t: make_entity([(CLIENT_ID, t[0])])),
        st.tuples(names, names).map(lambda t: make_entity([(USER, t[0]), (CLIENT_ID, t[1])])),
        st.tuples(ips).map(lambda t: make_entity([(IP, t[0])])),
    )
)
def test_quota_entity_paths_round_trip(entity: tuple[tuple[str, str | None], ...]) -> None:
    entity_path = cz.quota_entity_path(entity)
    assert cz.quota_entity_of(entity_path) == entity
    notification = ConfigChangeNotification(entity_path)
    assert ConfigChangeNotification.decode(notification.encode()) == notification


quota_values = st.dictionaries(
    st.sampled_from(["producer_byte_rate", "consumer_byte_rate", "connection_creation_rate"]),
    st.integers(1, 2**53).map(float),
) | st.dictionaries(
    st.sampled_from(["request_percentage", "controller_mutation_rate"]),
    st.floats(min_value=1e-300, allow_nan=False, allow_infinity=False),
)


@given(quota_values, st.dictionaries(st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512"]), st.text()))
def test_quota_values_round_trip_and_keep_other_keys(
    values: dict[str, float], others: dict[str, str]
) -> None:
    config = cz.with_quotas(others, values)
    data = EntityConfig(config).encode()
    read = EntityConfig.decode(data).configs
    assert cz.decode_quota_values(read) == values
    assert {k: v for k, v in read.items() if k not in cz.QUOTA_KEYS} == others
    assert all(math.isfinite(v) for v in cz.decode_quota_values(read).values())


def test_kafka_broker_config_paths() -> None:
    assert cz.broker_config_path("") == "/config/brokers/<default>"
    assert cz.broker_config_path("3") == "/config/brokers/3"
    assert cz.broker_entity_path("") == "brokers/<default>"
    assert cz.broker_entity_path("12") == "brokers/12"
    assert cz.broker_resource_of("brokers/<default>") == ""
    assert cz.broker_resource_of("brokers/12") == "12"
    assert cz.broker_resource_of("users/alice") is None
    for bad in ("brokers", "brokers/", "brokers/x", "brokers/1/2", "brokers/-1", "brokers/\u0661"):
        with pytest.raises(ZnodeFormatError):
            cz.broker_resource_of(bad)
    with pytest.raises(ValueError):
        cz.broker_entity_path("abc")


@given(st.one_of(st.just(""), st.integers(0, 2**31 - 1).map(str)))
def test_broker_entity_paths_round_trip(resource: str) -> None:
    assert cz.broker_resource_of(cz.broker_entity_path(resource)) == resource
