"""Listener settings as Kafka writes them: parsing, the protocol map, advertised listeners, their errors."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.broker.config import BrokerConfig, ConfigError
from exactly.security.listeners import (
    Endpoint,
    SecurityProtocol,
    parse_endpoints,
    parse_protocol_map,
)


def test_several_listeners_with_their_protocols_and_advertised_addresses() -> None:
    config = BrokerConfig.load(
        None,
        {
            "listeners": "PLAINTEXT://127.0.0.1:9092,EXTERNAL://0.0.0.0:9093,INTERNAL://[::1]:9094",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:SASL_SSL,INTERNAL:SSL",
            "advertised.listeners": "EXTERNAL://broker.example.com:19093",
            "inter.broker.listener.name": "internal",
        },
    )
    plain, external, internal = config.listeners
    assert (plain.name, plain.host, plain.port, plain.protocol) == (
        "PLAINTEXT",
        "127.0.0.1",
        9092,
        SecurityProtocol.PLAINTEXT,
    )
    assert (plain.advertised_host, plain.advertised_port) == ("127.0.0.1", 9092)
    assert external.protocol is SecurityProtocol.SASL_SSL
    assert external.protocol.tls
    assert external.protocol.sasl
    assert (external.advertised_host, external.advertised_port) == ("broker.example.com", 19093)
    assert (internal.host, internal.protocol) == ("::1", SecurityProtocol.SSL)
    assert internal.loopback_only
    assert plain.loopback_only
    assert not external.loopback_only
    assert config.listen == ("127.0.0.1", 9092)
    assert config.inter_broker_listener_name == "INTERNAL"


def test_the_older_bare_host_port_is_a_plaintext_listener() -> None:
    config = BrokerConfig.load(None, {"listeners": "0.0.0.0:7000", "advertised.listeners": "10.1.2.3:7001"})
    (only,) = config.listeners
    assert (only.name, only.protocol, only.host, only.port) == (
        "PLAINTEXT",
        SecurityProtocol.PLAINTEXT,
        "0.0.0.0",
        7000,
    )
    assert config.advertised == ("10.1.2.3", 7001)


def test_a_wildcard_host_is_advertised_as_loopback() -> None:
    config = BrokerConfig.load(None, {"listeners": "PLAINTEXT://:9092"})
    assert config.listen == ("", 9092)
    assert config.advertised == ("127.0.0.1", 9092)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"listeners": "PLAINTEXT://h:1,PLAINTEXT://h:2"}, "each listener must have a different name"),
        ({"listeners": "A://h:1"}, "listener A has no security protocol in listener.security.protocol.map"),
        ({"listeners": "PLAINTEXT://h:1,SSL://h:1"}, "two listeners cannot share a port"),
        (
            {"advertised.listeners": "SSL://h:1"},
            "advertised.listeners names listeners that do not exist: SSL",
        ),
        ({"inter.broker.listener.name": "OTHER"}, "inter.broker.listener.name 'OTHER' is not a listener"),
        ({"listener.security.protocol.map": "A:TLS"}, "unknown security protocol 'TLS'"),
        ({"listeners": "PLAINTEXT://h:99999"}, "expected NAME://HOST:PORT, got 'PLAINTEXT://h:99999'"),
        ({"listeners": ","}, "no listener given"),
    ],
)
def test_inconsistent_listener_settings_are_one_readable_line(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(None, props)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


names = st.from_regex(r"[A-Z][A-Z_]{0,10}", fullmatch=True)
hosts = st.sampled_from(["", "127.0.0.1", "0.0.0.0", "::1", "broker-1.example.com"])


@given(
    st.lists(st.tuples(names, hosts, st.integers(0, 65535)), min_size=1, max_size=4, unique_by=lambda t: t[0])
)
def test_endpoints_round_trip_through_their_text(items: list[tuple[str, str, int]]) -> None:
    endpoints = tuple(Endpoint(*item) for item in items)
    assert parse_endpoints(",".join(map(str, endpoints))) == endpoints


@given(st.dictionaries(names, st.sampled_from(list(SecurityProtocol)), min_size=1, max_size=5))
def test_protocol_maps_round_trip(mapping: dict[str, SecurityProtocol]) -> None:
    text = ",".join(f"{name}:{protocol.value}" for name, protocol in mapping.items())
    assert parse_protocol_map(text) == mapping


@given(st.text(max_size=40))
def test_any_text_parses_or_raises_value_error(text: str) -> None:
    with contextlib.suppress(ValueError):
        parse_endpoints(text)
