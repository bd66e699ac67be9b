"""Old change notifications are purged as Kafka purges them (15 minutes after they were created, once
handled), against a real ZooKeeper: the pure rule, the purge itself, and the config store purging what it
handled."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from exactly.broker.change_notifications import (
    NOTIFICATION_EXPIRATION_MS,
    is_obsolete,
    purge_obsolete_notifications,
)
from exactly.broker.config_store import ZkConfigStore
from exactly.broker.zookeeper import ZooKeeper
from exactly.cluster.metadata import ClusterMetadata
from exactly.cluster.znodes import CONFIG_CHANGES
from exactly.quotas.entities import make_entity
from tests.broker.parts import until

pytestmark = pytest.mark.timeout(60)


def test_a_notification_is_obsolete_only_after_its_expiration() -> None:
    assert NOTIFICATION_EXPIRATION_MS == 15 * 60 * 1000  # Kafka's changeExpirationMs
    assert not is_obsolete(1_000, 1_000 + NOTIFICATION_EXPIRATION_MS)
    assert is_obsolete(1_000, 1_001 + NOTIFICATION_EXPIRATION_MS)
    assert not is_obsolete(1_000, 2_000, expiration_ms=1_000)
    assert is_obsolete(1_000, 2_001, expiration_ms=1_000)


def test_the_purge_deletes_only_handled_notifications_past_their_expiration(zk_connect: str) -> None:
    async def main() -> None:
        zk = ZooKeeper(zk_connect)
        await zk.start()
        try:
            path = "/changes"
            created = [
                await zk.create(f"{path}/change_", b"x", sequence=True, makepath=True) for _ in range(3)
            ]
            names = sorted(c.rsplit("/", 1)[1] for c in created)
            stat = await zk.exists(f"{path}/{names[-1]}")
            assert stat is not None
            young = stat.ctime + 1
            assert await purge_obsolete_notifications(zk, path, names[:2], young) == 0
            assert sorted(await zk.get_children(path) or []) == names
            old = stat.ctime + NOTIFICATION_EXPIRATION_MS + 1
            assert await purge_obsolete_notifications(zk, path, names[:2], old) == 2
            assert await zk.get_children(path) == [names[2]]  # not handled yet: kept
            # purged meanwhile by another broker: no error, nothing counted
            assert await purge_obsolete_notifications(zk, path, names[:2], old) == 0
        finally:
            await zk.stop()

    asyncio.run(main())


def test_the_config_store_purges_the_notifications_it_handled(zk_connect: str, tmp_path: Path) -> None:
    async def main() -> None:
        zk = ZooKeeper(zk_connect)
        await zk.start()
        store = ZkConfigStore(zk, ClusterMetadata(tmp_path), broker_id=1)
        try:
            await store.start()
            entity = make_entity([("client-id", "c1")])
            await store.alter_client_quotas(entity, {"producer_byte_rate": 1024.0})
            await store.alter_client_quotas(entity, {"producer_byte_rate": 2048.0})
            await until(lambda: store._last >= 1)
            assert len(await zk.get_children(CONFIG_CHANGES) or []) == 2  # young: kept

            store.wall_ms = lambda: 2**62  # far in the future: every handled notification is old
            await store.alter_client_quotas(entity, {"producer_byte_rate": 4096.0})
            seen: list[list[str]] = []
            zk.watch_children(CONFIG_CHANGES, seen.append)
            await until(lambda: bool(seen) and seen[-1] == [])  # the new one handled, then all purged
            assert store.metadata.client_quotas[entity] == {"producer_byte_rate": 4096.0}
        finally:
            store.stop()
            await zk.stop()

    asyncio.run(main())
