"""Listeners: where the broker accepts connections and which security protocol each one speaks.

Kafka's settings, Kafka's syntax:

    listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093
    advertised.listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://broker.example.com:9093
    listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
    inter.broker.listener.name=PLAINTEXT

A listener is `NAME://HOST:PORT`; NAME maps to a security protocol through the protocol map (whose default
maps each protocol's own name to itself). An empty HOST binds every interface; `[::1]` is an IPv6 address.
A bare `HOST:PORT` (exactly's older form, still accepted) is a PLAINTEXT listener.
`advertised.listeners` defaults, per listener, to the listener itself (a wildcard host advertised as
127.0.0.1); the names it lists must be listener names. Metadata and FindCoordinator answer with the
endpoint of the listener the request came in on, as Kafka does. `inter.broker.listener.name` must name a
listener (a single broker has no peers; the setting is validated so that a cluster's file works here).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType


class SecurityProtocol(Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


DEFAULT_PROTOCOL_MAP: Mapping[str, SecurityProtocol] = MappingProxyType(
    {p.value: p for p in SecurityProtocol}
)
WILDCARD_HOSTS = ("", "0.0.0.0", "::")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One `NAME://HOST:PORT` as written."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Listener:
    """A listener resolved against the protocol map and the advertised listeners."""

    name: str
    host: str
    port: int
    protocol: SecurityProtocol
    advertised_host: str
    advertised_port: int

    @property
    def loopback_only(self) -> bool:
        return self.host in ("127.0.0.1", "localhost", "::1") or self.host.startswith("127.")


def parse_endpoints(text: str) -> tuple[Endpoint, ...]:
    """`NAME://HOST:PORT,...` (or one bare `HOST:PORT`) -> endpoints; ValueError on bad syntax."""
    out: list[Endpoint] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, address = item.partition("://")
        if not sep:
            name, address = SecurityProtocol.PLAINTEXT.value, item
        name = name.strip().upper()
        if not name:
            raise ValueError(f"a listener needs a name: {item!r}")
        host, colon, port = address.rpartition(":")
        if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"expected NAME://HOST:PORT, got {item!r}")
        out.append(Endpoint(name, host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no listener given")
    names = [e.name for e in out]
    if len(set(names)) != len(names):
        raise ValueError(f"each listener must have a different name: {text!r}")
    return tuple(out)


def parse_protocol_map(text: str) -> dict[str, SecurityProtocol]:
    """`NAME:PROTOCOL,...` -> {NAME: protocol}; ValueError on an unknown protocol."""
    out: dict[str, SecurityProtocol] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"expected NAME:PROTOCOL, got {item!r}")
        try:
            out[name.strip().upper()] = SecurityProtocol(protocol.strip().upper())
        except ValueError:
            known = ", ".join(p.value for p in SecurityProtocol)
            raise ValueError(f"unknown security protocol {protocol.strip()!r} (known: {known})") from None
    return out


def resolve_listeners(
    endpoints: tuple[Endpoint, ...],
    advertised: tuple[Endpoint, ...] | None,
    protocol_map: Mapping[str, SecurityProtocol],
    inter_broker_listener_name: str | None,
) -> tuple[Listener, ...]:
    """The listeners as the broker serves them; ValueError saying what is inconsistent."""
    ports = [e.port for e in endpoints if e.port != 0]
    if len(set(ports)) != len(ports):
        raise ValueError("two listeners cannot share a port")
    by_name = {e.name: e for e in advertised or ()}
    unknown = sorted(set(by_name) - {e.name for e in endpoints})
    if unknown:
        raise ValueError(f"advertised.listeners names listeners that do not exist: {', '.join(unknown)}")
    if inter_broker_listener_name is not None and inter_broker_listener_name.upper() not in {
        e.name for e in endpoints
    }:
        raise ValueError(f"inter.broker.listener.name {inter_broker_listener_name!r} is not a listener")
    out: list[Listener] = []
    for e in endpoints:
        protocol = protocol_map.get(e.name)
        if protocol is None:
            raise ValueError(f"listener {e.name} has no security protocol in listener.security.protocol.map")
        adv = by_name.get(e.name)
        if adv is None:
            host = "127.0.0.1" if e.host in WILDCARD_HOSTS else e.host
            out.append(Listener(e.name, e.host, e.port, protocol, host, e.port))
        else:
            out.append(Listener(e.name, e.host, e.port, protocol, adv.host, adv.port))
    return tuple(out)
