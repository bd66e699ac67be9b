"""Per-address connection accounting and `max.connections.per.ip.overrides` parsing (no sockets)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from exactly.quotas.connections import (
    INT_MAX,
    IpConnections,
    canonical_ip,
    check_per_ip,
    parse_ip_overrides,
    per_ip_limit,
)


def test_overrides_are_host_count_pairs() -> None:
    assert parse_ip_overrides("") == {}
    assert parse_ip_overrides(" 127.0.0.1:5 , broker-1.example:100,::1:2,[fe80::1]:3,") == {
        "127.0.0.1": 5,
        "broker-1.example": 100,
        "::1": 2,
        "fe80::1": 3,
    }
    assert parse_ip_overrides("::ffff:10.0.0.1:0") == {"10.0.0.1": 0}


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("127.0.0.1", "expected host:count"),
        (":5", "expected host:count"),
        ("127.0.0.1:x", "not an integer"),
        ("127.0.0.1:-1", r"must be in 0\.\."),
        (f"127.0.0.1:{INT_MAX + 1}", r"must be in 0\.\."),
        ("fe80:::zz:1", "neither an IP address nor a host name"),
    ],
)
def test_malformed_overrides_say_why(raw: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_ip_overrides(raw)


ipv4 = st.ip_addresses(v=4).map(str)


@given(st.dictionaries(ipv4, st.integers(0, INT_MAX), max_size=5))
def test_overrides_round_trip(overrides: dict[str, int]) -> None:
    assert parse_ip_overrides(",".join(f"{h}:{c}" for h, c in overrides.items())) == overrides


def test_zero_per_ip_needs_overrides() -> None:
    check_per_ip(0, {"127.0.0.1": 1})
    check_per_ip(1, {})
    with pytest.raises(ValueError, match=r"can be set to zero only if max\.connections\.per\.ip\.overrides"):
        check_per_ip(0, {})


def test_a_connection_beyond_the_limit_is_refused_and_a_close_frees_it() -> None:
    limits = per_ip_limit(1, {"10.0.0.2": 3})
    ips = IpConnections(limits)
    assert ips.try_open("127.0.0.1")
    assert not ips.try_open("127.0.0.1")
    assert not ips.try_open("::ffff:127.0.0.1")  # the same address over IPv6
    assert ips.count("127.0.0.1") == 1
    assert [ips.try_open("10.0.0.2") for _ in range(4)] == [True, True, True, False]
    ips.close("127.0.0.1")
    assert ips.count("127.0.0.1") == 0
    assert ips.try_open("127.0.0.1")
    assert ips.limit("10.0.0.2") == 3


def test_the_limit_is_read_at_every_open() -> None:
    limit = [1]
    ips = IpConnections(lambda ip: limit[0])
    assert ips.try_open("a")
    assert not ips.try_open("a")
    limit[0] = 2  # max.connections.per.ip raised at run time
    assert ips.try_open("a")
    limit[0] = 1  # lowered: the open connections stay, new ones wait for closes below it
    assert not ips.try_open("a")
    ips.close("a")
    assert not ips.try_open("a")
    ips.close("a")
    assert ips.try_open("a")


def test_canonical_ip() -> None:
    assert canonical_ip("::FFFF:127.0.0.1") == "127.0.0.1"
    assert canonical_ip("0:0:0:0:0:0:0:1") == "::1"
    assert canonical_ip("localhost") == "localhost"


class IpConnectionsMachine(RuleBasedStateMachine):
    """Against a model: an address never holds more than its limit, and closes give slots back."""

    def __init__(self) -> None:
        super().__init__()
        self.limits = {"a": 0, "b": 1, "c": 3}
        self.ips = IpConnections(per_ip_limit(2, self.limits))
        self.model: dict[str, int] = {}

    @rule(address=st.sampled_from(["a", "b", "c", "d"]))
    def open(self, address: str) -> None:
        held = self.model.get(address, 0)
        admitted = self.ips.try_open(address)
        assert admitted == (held < self.limits.get(address, 2))
        if admitted:
            self.model[address] = held + 1

    @precondition(lambda self: any(self.model.values()))
    @rule(data=st.data())
    def close(self, data: st.DataObject) -> None:
        address = data.draw(st.sampled_from(sorted(a for a, n in self.model.items() if n)))
        self.ips.close(address)
        self.model[address] -= 1

    @invariant()
    def counts_match(self) -> None:
        for address in "abcd":
            assert self.ips.count(address) == self.model.get(address, 0)


TestIpConnections = IpConnectionsMachine.TestCase
