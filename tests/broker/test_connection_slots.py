"""ConnectionSlots (broker-wide, per-listener and per-address limits) and the connections' share of the
open-file limit, directly (no sockets)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from exactly.broker.config import BrokerConfig
from exactly.broker.connection_slots import (
    MIN_RESERVE,
    UNLIMITED,
    ConnectionSlots,
    IpLimits,
    descriptor_share,
)


@pytest.mark.parametrize(
    ("nofile", "segments", "share"),
    [
        (20_000, 5_000, 13_000),  # a tenth kept back
        (1_024, 256, 1_024 - 256 - 102),
        (300, 75, 300 - 75 - MIN_RESERVE),  # at least 64 kept back
        (100, 1_000, 1),  # segment files configured beyond the limit: still one connection
        (UNLIMITED, 5_000, UNLIMITED),
    ],
)
def test_the_share_is_the_limit_less_segments_and_a_reserve(nofile: int, segments: int, share: int) -> None:
    assert descriptor_share(segments, nofile) == share


def test_a_listener_waits_for_a_slot_and_the_capacity_is_read_at_every_wait() -> None:
    capacity = [2]

    async def scenario() -> list[str]:
        slots = ConnectionSlots(lambda: capacity[0])
        events: list[str] = []

        async def accept(name: str) -> None:
            await slots.wait_for_slot("PLAINTEXT")
            slots.opened()
            events.append(name)

        await accept("a")
        await accept("b")
        third = asyncio.create_task(accept("c"))
        for _ in range(5):
            await asyncio.sleep(0)
        events.append(f"waiting, {slots.open} open")
        slots.release()
        await third
        capacity[0] = 5  # max.connections raised at run time: no wait
        await accept("d")
        return events

    assert asyncio.run(scenario()) == ["a", "b", "waiting, 2 open", "c", "d"]


def test_full_and_resumed_are_one_line_each(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        slots = ConnectionSlots(lambda: 1)
        await slots.wait_for_slot("PLAINTEXT")
        slots.opened()
        waiters = [asyncio.create_task(slots.wait_for_slot("PLAINTEXT")) for _ in range(3)]
        for _ in range(5):
            await asyncio.sleep(0)
        slots.release()
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for w in waiters:
            w.cancel()

    with caplog.at_level("INFO", logger="exactly.broker.connection_slots"):
        asyncio.run(scenario())
    messages = [r.getMessage() for r in caplog.records]
    assert len([m for m in messages if "new connections wait" in m]) == 1, messages
    assert len([m for m in messages if "accepting connections again" in m]) == 1, messages


def test_a_listener_at_its_own_limit_waits_while_the_others_accept() -> None:
    limits = {"INTERNAL": 1}

    async def scenario() -> list[str]:
        slots = ConnectionSlots(lambda: 10, listener_capacity=lambda name: limits.get(name, UNLIMITED))
        events: list[str] = []

        async def accept(listener: str) -> None:
            await slots.wait_for_slot(listener)
            slots.opened(listener)
            events.append(listener)

        await accept("INTERNAL")
        blocked = asyncio.create_task(accept("INTERNAL"))
        await accept("PLAINTEXT")
        await accept("PLAINTEXT")
        for _ in range(5):
            await asyncio.sleep(0)
        events.append(f"waiting, {slots.per_listener}")
        slots.release("INTERNAL")
        await blocked
        return events

    assert asyncio.run(scenario()) == [
        "INTERNAL",
        "PLAINTEXT",
        "PLAINTEXT",
        "waiting, {'INTERNAL': 1, 'PLAINTEXT': 2}",
        "INTERNAL",
    ]


def test_an_address_over_its_limit_is_not_admitted_until_one_of_its_connections_closes() -> None:
    slots = ConnectionSlots(lambda: 10, per_ip=lambda address: 1 if address == "127.0.0.1" else 2)
    assert slots.admit("127.0.0.1")
    slots.opened("PLAINTEXT")
    assert not slots.admit("127.0.0.1")  # refused: not counted anywhere
    assert [slots.admit("10.0.0.1") for _ in range(3)] == [True, True, False]
    assert slots.open == 1
    slots.release("PLAINTEXT", "127.0.0.1")
    assert slots.admit("127.0.0.1")


def test_ip_limits_resolve_host_names_once_per_overrides_value() -> None:
    limits = IpLimits()
    config = BrokerConfig(
        max_connections_per_ip=3, max_connections_per_ip_overrides={"localhost": 1, "10.1.2.3": 0}
    )
    assert limits.limit(config, "127.0.0.1") == 1
    assert limits.limit(config, "10.1.2.3") == 0
    assert limits.limit(config, "10.9.9.9") == 3
    changed = dataclasses.replace(config, max_connections_per_ip_overrides={})
    assert limits.limit(changed, "127.0.0.1") == 3
