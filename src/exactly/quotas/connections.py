"""Connections per client address, as Kafka's ConnectionQuotas counts them: `max.connections.per.ip` and
`max.connections.per.ip.overrides`.

Config format (Kafka's `max.connections.per.ip.overrides`): comma-separated `host:count` entries, blanks
around items ignored, e.g. `127.0.0.1:5, ::1:5, broker-host:100`; the host is an IP address or a name
(names are resolved by the broker to their addresses, as Kafka's `InetAddress.getByName`); the count is a
non-negative INT. The last colon separates host and count, so an IPv6 address needs no brackets (brackets
are accepted). `max.connections.per.ip` may be 0 only when overrides are given (Kafka's rule: otherwise
nobody could connect).

`IpConnections` is the accounting: a new connection from an address that already holds its limit is
refused (the broker closes it at once after accept, with one INFO line), otherwise it counts until it
closes. Pure: no sockets; the broker passes the limits in.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping

INT_MAX = 2**31 - 1


def parse_ip_overrides(raw: str) -> dict[str, int]:
    """`host:count,host2:count` -> {host: count}; ValueError with a readable reason when malformed. IP
    addresses come back in their canonical text (`::FFFF:127.0.0.1` -> `127.0.0.1`), names as given."""
    out: dict[str, int] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        host, sep, count_text = item.rpartition(":")
        host = host.strip()
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not sep or not host:
            raise ValueError(f"expected host:count, got {item!r}")
        try:
            count = int(count_text.strip())
        except ValueError:
            raise ValueError(f"the count of {host} is not an integer: {count_text.strip()!r}") from None
        if not 0 <= count <= INT_MAX:
            raise ValueError(f"the count of {host} must be in 0..{INT_MAX}, got {count}")
        if ":" in host and not _is_ip(host):
            raise ValueError(f"{host!r} is neither an IP address nor a host name")
        out[canonical_ip(host)] = count
    return out


def check_per_ip(per_ip: int, overrides: Mapping[str, int]) -> None:
    """Kafka's rule for the pair (ValueError when broken)."""
    if per_ip == 0 and not overrides:
        raise ValueError(
            "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides "
            "property is set."
        )


def canonical_ip(host: str) -> str:
    """An IP address's canonical text (IPv4-mapped IPv6 as IPv4); anything else unchanged."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


class IpConnections:
    """Open connections per client address, against `limit(address)` (read at every open, so a dynamic
    change applies to the next connection; connections already open stay)."""

    def __init__(self, limit: Callable[[str], int]) -> None:
        self._limit = limit
        self._counts: dict[str, int] = {}

    def try_open(self, address: str) -> bool:
        """Count a new connection from `address`; False (not counted) when the address holds its limit."""
        ip = canonical_ip(address)
        count = self._counts.get(ip, 0)
        if count >= self._limit(ip):
            return False
        self._counts[ip] = count + 1
        return True

    def limit(self, address: str) -> int:
        return self._limit(canonical_ip(address))

    def close(self, address: str) -> None:
        ip = canonical_ip(address)
        count = self._counts.get(ip, 0) - 1
        if count > 0:
            self._counts[ip] = count
        else:
            self._counts.pop(ip, None)

    def count(self, address: str) -> int:
        return self._counts.get(canonical_ip(address), 0)


def per_ip_limit(per_ip: int, overrides: Mapping[str, int]) -> Callable[[str], int]:
    """The limit of one address: its override, else `per_ip` (overrides keyed by canonical IP)."""
    return lambda ip: overrides.get(ip, per_ip)
