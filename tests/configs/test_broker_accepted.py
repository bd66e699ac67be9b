"""Every broker config of Kafka 4.0 is in the catalogue with Kafka's type, default and update mode.

`kafka40_broker_configs.tsv` is Kafka 4.0's "Broker Configs" page reduced to name, type, default and
update mode (`python -m tools.broker_catalogue` compares with a page directly). The configs exactly defines
itself may differ where the difference is exactly's on purpose; those are listed here with the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from exactly.broker.config import BrokerConfig
from exactly.configs import BROKER_CONFIGS, ConfigType
from exactly.configs.broker_accepted import ACCEPTED_BROKER_CONFIGS
from exactly.errors import ErrorCode, KafkaError

KAFKA = [
    line.split("\t")
    for line in (Path(__file__).parent / "kafka40_broker_configs.tsv").read_text().splitlines()
    if not line.startswith("#")
]

# exactly's own definitions that differ from Kafka 4.0's, on purpose
OWN_DEFAULTS = {
    "node.id",  # exactly: -1, then the --node-id flag
    "sasl.enabled.mechanisms",  # no GSSAPI in exactly
    "listener.security.protocol.map",  # the same pairs in another order
    "log.message.timestamp.after.max.ms",  # the topic config's default, exactly's unbounded
}
OWN_TYPES = {"log.dirs"}  # a LIST in exactly (Kafka: a comma-separated STRING)
# Kafka changes these at run time, exactly only by a restart (listeners, TLS and SASL settings), or the
# other way round (the hours/minutes synonyms of topic defaults, as their ms forms)
OWN_MODES = {
    "listeners",
    "listener.security.protocol.map",
    "log.flush.scheduler.interval.ms",
    "log.retention.hours",
    "log.retention.minutes",
    "log.roll.hours",
    "log.roll.jitter.hours",
}


def _mode(name: str) -> str:
    definition = BROKER_CONFIGS[name]
    if not definition.dynamic:
        return "read-only"
    return "per-broker" if definition.per_broker else "cluster-wide"


def test_every_kafka_4_broker_config_is_in_the_catalogue() -> None:
    assert len(KAFKA) == 289
    assert [name for name, *_ in KAFKA if name not in BROKER_CONFIGS] == []
    for name, type_, default, mode in KAFKA:
        definition = BROKER_CONFIGS[name]
        if name not in OWN_TYPES:
            assert definition.type.name.lower() == type_, name
        if name not in OWN_DEFAULTS:
            assert definition.default == (None if default == "<null>" else default), name
        if (
            name not in OWN_MODES and not name.startswith(("ssl.", "sasl."))
        ) or definition in ACCEPTED_BROKER_CONFIGS:
            assert _mode(name) == mode, name


def test_accepted_configs_are_kafkas_own() -> None:
    assert len(ACCEPTED_BROKER_CONFIGS) == 164  # what the catalogue lacked before, less what is built
    kerberos = BROKER_CONFIGS["sasl.kerberos.min.time.before.relogin"]
    assert (kerberos.type, kerberos.default, kerberos.dynamic, kerberos.per_broker) == (
        ConfigType.LONG,
        "60000",
        True,
        True,
    )
    assert BROKER_CONFIGS["delegation.token.secret.key"].sensitive
    assert BROKER_CONFIGS["max.connections.per.ip"].dynamic
    assert not BROKER_CONFIGS["max.connections.per.ip"].per_broker
    assert BROKER_CONFIGS["group.share.delivery.count.limit"].parse("10") == 10
    with pytest.raises(KafkaError) as raised:
        BROKER_CONFIGS["group.share.delivery.count.limit"].parse("11")
    assert raised.value.code == ErrorCode.INVALID_CONFIG
    assert raised.value.message.endswith("Value must be in range [2,...,10]")
    assert BROKER_CONFIGS["group.consumer.migration.policy"].canonical("Upgrade") == "Upgrade"
    assert BROKER_CONFIGS["process.roles"].parse("broker,controller") == ("broker", "controller")
    with pytest.raises(KafkaError):
        BROKER_CONFIGS["process.roles"].parse("observer")


def test_a_kafka_server_properties_starts_without_unknown_config_warnings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = BrokerConfig.from_properties(
        {
            "process.roles": "broker,controller",
            "controller.quorum.voters": "1@localhost:9093",
            "controller.listener.names": "CONTROLLER",
            "group.coordinator.rebalance.protocols": "classic,consumer",
            "sasl.kerberos.service.name": "kafka",
            "socket.send.buffer.bytes": "102400",
        }
    )
    assert config.properties["sasl.kerberos.service.name"] == "kafka"
    assert "unknown config" not in caplog.text
