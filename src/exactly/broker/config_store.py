"""A cluster's client quotas and dynamic broker configs in ZooKeeper (Kafka's ZooKeeper-mode
`ZkAdminManager` / `AdminZkClient.changeConfigs` storage and `DynamicConfigManager`), so that a quota or a
run-time broker config set through any broker applies on every broker. The znodes and their bytes:
exactly.cluster.config_znodes.

Writes (from the AlterClientQuotas handler and the broker resources of AlterConfigs /
IncrementalAlterConfigs, through `ClusterMember.dynamic_configs`): a read-modify-write of the entity's
znode conditional on its version, retried when another broker wrote it meanwhile (a user's znode keeps its
SCRAM credentials); a broker config znode gets the complete new set. Then a sequential change notification
announces it, and the znode's state is applied here at once (in order with the notifications, so the
request's answer already holds on this broker).

Every broker watches `/config/changes` and reads the announced znode again, applying it to its in-memory
`ClusterMetadata` as the local metadata log's records would: `client_quotas` (which the quota managers
read) and `broker_configs` for the cluster default and this broker's own id (then `broker_configs_changed`
lets the broker's `BrokerConfigs` recompute its configs and apply them to the logs). Notifications for
other entities (topics: watched directly; users' SCRAM credentials: exactly.broker.security_store; other
brokers) are skipped. At start everything is loaded, and the local log's quotas and broker configs give way
to the cluster's; notifications older than the load are skipped. Handled notifications older than 15
minutes are deleted, as Kafka does (exactly.broker.change_notifications).

ZooKeeper being out of reach (ConnectionLoss, SessionExpiredError) is left to the caller, which retries
until the request's deadline (`ClusterMember._until_connected`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping

from kazoo.exceptions import KazooException

from exactly.broker.change_notifications import handled_notifications, purge_obsolete_notifications
from exactly.broker.zookeeper import BadVersionError, NodeExistsError, NoNodeError, Watch, ZooKeeper
from exactly.cluster import config_znodes as cz
from exactly.cluster import security_znodes as sz
from exactly.cluster.metadata import ClusterMetadata
from exactly.cluster.znodes import (
    CONFIG_CHANGES,
    ConfigChangeNotification,
    EntityConfig,
    ZnodeFormatError,
    config_type_path,
)
from exactly.errors import ExactlyError
from exactly.quotas.entities import QuotaEntity

log = logging.getLogger(__name__)

__all__ = ["ZkConfigStore"]


class ZkConfigStore:
    def __init__(self, zk: ZooKeeper, metadata: ClusterMetadata, broker_id: int) -> None:
        self.zk = zk
        self.metadata = metadata
        self.broker_id = broker_id
        self.broker_configs_changed: Callable[[], None] | None = None  # the broker's BrokerConfigs.reload
        self.wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)  # against znodes' ctime
        self._last = -1  # the last notification handled
        self._watch: Watch | None = None
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    # --- start and stop ----------------------------------------------------------------------------------

    async def start(self) -> None:
        for kind in ("users", "clients", "ips", "brokers"):
            await self.zk.ensure_path(config_type_path(kind))
        await self.zk.ensure_path(CONFIG_CHANGES)
        async with self._lock:
            self._last = max(
                (
                    n
                    for c in await self._children(CONFIG_CHANGES)
                    if (n := sz.change_sequence(c, sz.CONFIG_CHANGE_PREFIX)) is not None
                ),
                default=-1,
            )
            await self._load_all()
        self._watch = self.zk.watch_children(CONFIG_CHANGES, lambda _children: self._poke())

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        for task in list(self._tasks):
            task.cancel()

    async def _children(self, path: str) -> list[str]:
        return await self.zk.get_children(path) or []

    def _resources(self) -> tuple[str, str]:
        """The broker config resources this broker applies: the default and its own id."""
        return "", str(self.broker_id)

    async def _load_all(self) -> None:
        entities: list[QuotaEntity] = []
        users = config_type_path("users")
        paths: list[str] = []
        for user in await self._children(users):
            paths.append(f"users/{user}")
            paths.extend(f"users/{user}/clients/{c}" for c in await self._children(f"{users}/{user}/clients"))
        for kind in ("clients", "ips"):
            paths.extend(f"{kind}/{name}" for name in await self._children(config_type_path(kind)))
        for entity_path in paths:
            try:
                entity = cz.quota_entity_of(entity_path)
            except ZnodeFormatError as e:
                log.error("skipping the config znode %s: %s", entity_path, e)
                continue
            if entity is not None:
                entities.append(entity)
        quotas: dict[QuotaEntity, dict[str, float]] = {}
        for entity in entities:
            values = await self._read_quotas(entity)
            if values:
                quotas[entity] = values
        self.metadata.client_quotas.clear()
        self.metadata.client_quotas.update(quotas)
        self.metadata.broker_configs.clear()
        for resource in self._resources():
            configs = await self._read_broker_configs(resource)
            if configs:
                self.metadata.broker_configs[resource] = configs
        if self.broker_configs_changed is not None:
            self.broker_configs_changed()
        log.info(
            "loaded %d client quota entities and %d broker config sets from ZooKeeper",
            len(quotas),
            len(self.metadata.broker_configs),
        )

    # --- reading -----------------------------------------------------------------------------------------

    async def _read_config(self, path: str) -> tuple[dict[str, str], int | None]:
        """An entity config and its znode's version (None: no znode)."""
        found = await self.zk.get(path)
        if found is None:
            return {}, None
        data, stat = found
        return (dict(EntityConfig.decode(data).configs) if data.strip() else {}), stat.version

    async def _read_quotas(self, entity: QuotaEntity) -> dict[str, float]:
        try:
            config, _ = await self._read_config(cz.quota_config_path(entity))
            return cz.decode_quota_values(config)
        except ZnodeFormatError as e:
            log.error("the quotas of %s are unreadable: %s", cz.quota_entity_path(entity), e)
            return {}

    async def _read_broker_configs(self, resource: str) -> dict[str, str]:
        try:
            config, _ = await self._read_config(cz.broker_config_path(resource))
            return config
        except ZnodeFormatError as e:
            log.error("the configs of %s are unreadable: %s", cz.broker_entity_path(resource), e)
            return {}

    # --- applying ----------------------------------------------------------------------------------------

    def _apply_quotas(self, entity: QuotaEntity, values: dict[str, float]) -> None:
        if values:
            self.metadata.client_quotas[entity] = values
        else:
            self.metadata.client_quotas.pop(entity, None)

    def _apply_broker_configs(self, resource: str, configs: dict[str, str]) -> None:
        if self.metadata.broker_configs.get(resource, {}) == configs:
            return
        if configs:
            self.metadata.broker_configs[resource] = configs
        else:
            self.metadata.broker_configs.pop(resource, None)
        log.info("run-time configs of %s: %s", cz.broker_entity_path(resource), configs)
        if self.broker_configs_changed is not None:
            self.broker_configs_changed()

    # --- notifications -----------------------------------------------------------------------------------

    def _poke(self) -> None:
        task = asyncio.get_running_loop().create_task(self._catch_up())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _catch_up(self) -> None:
        """Handle the notifications not handled yet, in order (one catch-up at a time)."""
        async with self._lock:
            try:
                children = await self._children(CONFIG_CHANGES)
                new = sorted(
                    (n, c)
                    for c in children
                    if (n := sz.change_sequence(c, sz.CONFIG_CHANGE_PREFIX)) is not None and n > self._last
                )
                for number, child in new:
                    found = await self.zk.get(f"{CONFIG_CHANGES}/{child}")
                    if found is not None:
                        try:
                            await self._handle(ConfigChangeNotification.decode(found[0]).entity_path)
                        except ZnodeFormatError as e:
                            log.error("notification %s/%s is unreadable: %s", CONFIG_CHANGES, child, e)
                    self._last = number
                handled = handled_notifications(children, sz.CONFIG_CHANGE_PREFIX, self._last)
                await purge_obsolete_notifications(self.zk, CONFIG_CHANGES, handled, self.wall_ms())
            except asyncio.CancelledError:
                raise
            except (ExactlyError, KazooException, OSError) as e:
                log.warning("reading the config change notifications failed (%s); at the next one", e)
            except Exception:
                log.exception("reading the config change notifications failed")

    async def _handle(self, entity_path: str) -> None:
        entity = cz.quota_entity_of(entity_path)
        if entity is not None:
            self._apply_quotas(entity, await self._read_quotas(entity))
            return
        resource = cz.broker_resource_of(entity_path)
        if resource is not None and resource in self._resources():
            self._apply_broker_configs(resource, await self._read_broker_configs(resource))

    # --- writing (the handlers) --------------------------------------------------------------------------

    async def alter_client_quotas(self, entity: QuotaEntity, changes: Mapping[str, float | None]) -> None:
        """Set `entity`'s quota values (None removes one); nothing is written when nothing changes."""
        path = cz.quota_config_path(entity)
        while True:
            config, version = await self._read_config(path)
            updated = cz.with_quotas(config, changes)
            if updated == config:
                break
            try:
                await self._write(path, updated, version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another broker wrote it meanwhile: again from its new state
            break
        # announced unless nothing changed at all (a retry whose write had landed still announces it)
        if self.metadata.client_quotas.get(entity, {}) != cz.decode_quota_values(updated):
            await self._announce(cz.quota_entity_path(entity))
        async with self._lock:  # in order with the notifications: ZooKeeper's current state
            self._apply_quotas(entity, await self._read_quotas(entity))

    async def set_broker_configs(self, resource: str, configs: Mapping[str, str]) -> None:
        """Replace the run-time configs of `resource` ("" = the cluster default, or a broker id)."""
        path = cz.broker_config_path(resource)
        wanted = dict(configs)
        while True:
            config, version = await self._read_config(path)
            if config == wanted and version is not None:
                break
            try:
                await self._write(path, wanted, version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            break
        if config != wanted or self.metadata.broker_configs.get(resource, {}) != wanted:
            await self._announce(cz.broker_entity_path(resource))
        if resource in self._resources():
            async with self._lock:
                self._apply_broker_configs(resource, await self._read_broker_configs(resource))

    async def _write(self, path: str, config: dict[str, str], version: int | None) -> None:
        data = EntityConfig(config).encode()
        if version is None:
            await self.zk.create(path, data, makepath=True)
        else:
            await self.zk.set(path, data, version=version)

    async def _announce(self, entity_path: str) -> None:
        await self.zk.create(
            f"{CONFIG_CHANGES}/{sz.CONFIG_CHANGE_PREFIX}",
            ConfigChangeNotification(entity_path).encode(),
            sequence=True,
        )
