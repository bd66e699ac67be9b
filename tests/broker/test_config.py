from __future__ import annotations

from pathlib import Path

import pytest

from exactly.broker.config import BrokerConfig, ConfigError, parse_overrides, read_properties
from exactly.errors import ErrorCode, KafkaError
from exactly.storage.config import CleanupPolicy


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig()
    assert config.listen == ("127.0.0.1", 9092)
    assert config.data_dir == Path("exactly-data")
    assert config.num_partitions == 1
    assert config.auto_create_topics is True
    assert config.socket_request_max_bytes == 104_857_600
    assert config.log.segment_bytes == 1 << 30
    assert config.log.retention_ms == 7 * 24 * 3600 * 1000


def test_server_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "# a comment\n! another\n\nlisteners=PLAINTEXT://0.0.0.0:9999\nnum.partitions = 3\n"
        "log.dirs=/var/x,/var/y\nlog.retention.hours=2\nlog.segment.bytes: 1048576\n"
        "log.cleanup.policy=compact\nsome.unknown.key=1\n"
    )
    config = BrokerConfig.load(path, {"num.partitions": "4"})
    assert config.listen == ("0.0.0.0", 9999)
    assert config.advertised == ("127.0.0.1", 9999)
    assert config.num_partitions == 4
    assert config.data_dir == Path("/var/x")
    assert config.log.retention_ms == 2 * 3_600_000
    assert config.log.segment_bytes == 1_048_576
    assert config.log.cleanup_policy is CleanupPolicy.COMPACT


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("num.partitions", "lots", "invalid value for num.partitions: expected an integer, got 'lots'"),
        ("num.partitions", "0", "invalid value for num.partitions: 0 is outside"),
        ("listeners", "nowhere", "invalid value for listeners: expected NAME://HOST:PORT, got 'nowhere'"),
        ("auto.create.topics.enable", "yes", "expected true or false"),
        (
            "log.segment.bytes",
            "3",
            "Invalid value 3 for configuration log.segment.bytes: Value must be at least 14",
        ),
        (
            "replica.selector.class",
            "com.example.Nearest",
            "invalid value for replica.selector.class: unknown replica selector 'com.example.Nearest'",
        ),
        (
            "log.cleanup.policy",
            "shred",
            "value shred for configuration log.cleanup.policy: String must be one of: compact, delete",
        ),
    ],
)
def test_invalid_values_are_one_readable_line(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(None, {key: value})
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_config_file() -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        read_properties(Path("/nonexistent/server.properties"))


def test_overrides() -> None:
    assert parse_overrides(["a=1", "b.c = x=y"]) == {"a": "1", "b.c": "x=y"}
    with pytest.raises(ConfigError):
        parse_overrides(["novalue"])


def test_max_request_partition_size_limit() -> None:
    assert BrokerConfig().max_request_partition_size_limit == 2000
    config = BrokerConfig.from_properties({"max.request.partition.size.limit": "5"})
    assert config.max_request_partition_size_limit == 5
    with pytest.raises(ConfigError):
        BrokerConfig.from_properties({"max.request.partition.size.limit": "0"})


def test_replica_selector_class_takes_kafkas_rack_aware_selector() -> None:
    assert BrokerConfig().replica_selector_class is None  # Kafka's default: consumers read from the leader
    name = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    assert BrokerConfig.load(None, {"replica.selector.class": name}).replica_selector_class == name
    assert BrokerConfig.load(None, {"replica.selector.class": " "}).replica_selector_class is None


def test_connection_limits_static_and_dynamic(caplog: pytest.LogCaptureFixture) -> None:
    config = BrokerConfig.from_properties(
        {
            "max.connections.per.ip": "5",
            "max.connections.per.ip.overrides": "127.0.0.1:1, localhost:2",
            "listener.name.plaintext.max.connections": "7",
        }
    )
    assert "ignoring unknown config" not in caplog.text
    assert config.max_connections_per_ip == 5
    assert config.max_connections_per_ip_overrides == {"127.0.0.1": 1, "localhost": 2}
    assert config.listener_max_connections == {"PLAINTEXT": 7}
    dynamic = config.with_dynamic(
        {"listener.name.internal.max.connections": "3", "max.connections.per.ip": "0"}
    )
    assert dynamic.listener_max_connections == {"PLAINTEXT": 7, "INTERNAL": 3}  # the static one stays
    assert dynamic.max_connections_per_ip == 0  # allowed: overrides are set
    assert config.with_dynamic({}).listener_max_connections == {"PLAINTEXT": 7}


@pytest.mark.parametrize(
    ("dynamic", "message"),
    [
        ({"max.connections.per.ip": "-1"}, "Invalid value -1 for configuration max.connections.per.ip"),
        (
            {"max.connections.per.ip.overrides": "127.0.0.1"},
            "Invalid value 127.0.0.1 for configuration max.connections.per.ip.overrides: expected host:count",
        ),
        ({"max.connections.per.ip.overrides": "h:-2"}, "the count of h must be in 0.."),
        ({"listener.name.plaintext.max.connections": "x"}, "listener.name.plaintext.max.connections"),
        ({"max.connections.per.ip": "0"}, "can be set to zero only if max.connections.per.ip.overrides"),
    ],
)
def test_invalid_connection_limits_are_invalid_config(dynamic: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaError) as raised:
        BrokerConfig().with_dynamic(dynamic)
    assert raised.value.code == ErrorCode.INVALID_CONFIG
    assert message in raised.value.message
    with pytest.raises(ConfigError):
        BrokerConfig.from_properties(dynamic)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", None),
        ("http://127.0.0.1:9404", ("127.0.0.1", 9404)),
        ("http://0.0.0.0:0/", ("0.0.0.0", 0)),
        ("http://[::1]:9404", ("::1", 9404)),
        ("http://:9404", ("0.0.0.0", 9404)),
    ],
)
def test_metrics_listener(value: str, expected: tuple[str, int] | None) -> None:
    config = BrokerConfig.from_properties({"metrics.listener": value})
    assert config.metrics_listener == expected
    assert config.metrics_per_partition


@pytest.mark.parametrize(
    "value", ["127.0.0.1:9404", "https://h:1", "http://h", "http://h:99999", "http://h:x"]
)
def test_an_invalid_metrics_listener_is_one_line(value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        BrokerConfig.from_properties({"metrics.listener": value})
    assert str(raised.value).startswith("invalid value for metrics.listener: ")
    assert "\n" not in str(raised.value)
