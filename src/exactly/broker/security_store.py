"""A cluster's ACLs and SCRAM credentials in ZooKeeper (Kafka's ZooKeeper-mode `AclAuthorizer` and
`ScramCredentialUtils` / `ConfigCommand` storage), so that one created through any broker applies on
every broker. The znodes and their bytes: exactly.cluster.security_znodes.

Writes (from the CreateAcls, DeleteAcls and AlterUserScramCredentials handlers, through
`ClusterMember.security`): a read-modify-write of the pattern's (or user's) znode conditional on its
version, retried when another broker wrote it meanwhile; an ACL znode left without entries is deleted. Then
a sequential change notification announces it, and the znode's state is applied here at once (in
order with the notifications, so the request's answer already holds on this broker).

Every broker (this one included) watches the notifications and reads the announced znode again, applying
what it holds to its in-memory `ClusterMetadata` exactly as the local metadata log's records would be
applied: the `acls` set (and, through `acls_changed`, the broker's authorizer index) and the
`scram_credentials` the SASL listeners check against. Notifications are handled in order, one at a time,
each by reading the znode's current state, so a late one never brings back an older state. At start
everything is loaded (the local log's ACLs and credentials give way to the cluster's, as its topics do);
notifications older than the load are skipped. Handled notifications older than 15 minutes are deleted,
as Kafka does (exactly.broker.change_notifications).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Iterable

from kazoo.exceptions import KazooException

from exactly.broker.change_notifications import handled_notifications, purge_obsolete_notifications
from exactly.broker.zookeeper import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
    Watch,
    ZooKeeper,
)
from exactly.cluster import security_znodes as sz
from exactly.cluster.metadata import ClusterMetadata, ScramCredential
from exactly.cluster.znodes import CONFIG_CHANGES, ConfigChangeNotification, EntityConfig, ZnodeFormatError
from exactly.errors import ExactlyError
from exactly.security.acls import AccessControlEntry, AclBinding, PatternType, ResourcePattern

log = logging.getLogger(__name__)

__all__ = ["AclsChanged", "SecurityStoreError", "ZkSecurityStore"]

AclsChanged = Callable[[Collection[AclBinding], Collection[AclBinding]], None]  # (added, removed)
_CHANGE_SOURCES = (
    (sz.ACL_CHANGES, sz.CHANGE_PREFIX),
    (sz.EXTENDED_ACL_CHANGES, sz.CHANGE_PREFIX),
    (CONFIG_CHANGES, sz.CONFIG_CHANGE_PREFIX),
)


class SecurityStoreError(ExactlyError):
    """ZooKeeper could not be written (the request's results say so)."""


class ZkSecurityStore:
    def __init__(self, zk: ZooKeeper, metadata: ClusterMetadata) -> None:
        self.zk = zk
        self.metadata = metadata
        self.acls_changed: AclsChanged | None = None  # the broker keeps its authorizer's index with it
        self.wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)  # against znodes' ctime
        self._last: dict[str, int] = {}  # change path -> the last notification handled
        self._watches: list[Watch] = []
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    # --- start and stop ----------------------------------------------------------------------------------

    async def start(self) -> None:
        for path in sz.SECURITY_PATHS:
            await self.zk.ensure_path(path)
        async with self._lock:
            for path, prefix in _CHANGE_SOURCES:
                self._last[path] = max(
                    (
                        n
                        for c in await self._children(path)
                        if (n := sz.change_sequence(c, prefix)) is not None
                    ),
                    default=-1,
                )
            await self._load_all()
        for path, _ in _CHANGE_SOURCES:
            self._watches.append(self.zk.watch_children(path, lambda _children: self._poke()))

    def stop(self) -> None:
        for watch in self._watches:
            watch.cancel()
        self._watches.clear()
        for task in list(self._tasks):
            task.cancel()

    async def _children(self, path: str) -> list[str]:
        return await self.zk.get_children(path) or []

    async def _load_all(self) -> None:
        bindings: set[AclBinding] = set()
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            for resource_type in sz.RESOURCE_TYPES:
                parent = sz.acl_type_path(pattern_type, resource_type)
                for name in await self._children(parent):
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    bindings.update(AclBinding(pattern, e) for e in await self._read_acls(pattern))
        acls = self.metadata.acls
        self._apply_acls(bindings - acls, acls - bindings)
        credentials: dict[tuple[str, str], ScramCredential] = {}
        for child in await self._children(sz.user_config_path("").rstrip("/")):
            user = sz.desanitize(child)
            for mechanism, credential in (await self._read_scram(user)).items():
                credentials[(user, mechanism)] = credential
        self.metadata.scram_credentials.clear()  # the same dict the SASL sessions look in
        self.metadata.scram_credentials.update(credentials)
        log.info(
            "loaded %d ACL bindings and %d SCRAM credentials from ZooKeeper", len(acls), len(credentials)
        )

    # --- reading -----------------------------------------------------------------------------------------

    async def _read_acls(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        found = await self.zk.get(sz.acl_path(pattern))
        if found is None:
            return frozenset()
        try:
            return sz.decode_acls(found[0])
        except ZnodeFormatError as e:
            log.error("the ACLs of %s are unreadable: %s", pattern, e)
            return frozenset()

    async def _read_user(self, user: str) -> tuple[dict[str, str], int | None]:
        """The user's entity config and its znode's version (None: no znode)."""
        found = await self.zk.get(sz.user_config_path(user))
        if found is None:
            return {}, None
        data, stat = found
        return (dict(EntityConfig.decode(data).configs) if data.strip() else {}), stat.version

    async def _read_scram(self, user: str) -> dict[str, ScramCredential]:
        try:
            config, _ = await self._read_user(user)
            return sz.scram_credentials(config)
        except ZnodeFormatError as e:
            log.error("the config of user %s is unreadable: %s", user, e)
            return {}

    # --- applying ----------------------------------------------------------------------------------------

    def _apply_acls(self, added: Iterable[AclBinding], removed: Iterable[AclBinding]) -> None:
        added, removed = set(added), set(removed)
        self.metadata.acls.update(added)
        self.metadata.acls.difference_update(removed)
        if (added or removed) and self.acls_changed is not None:
            self.acls_changed(added, removed)

    def _apply_pattern(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        """The pattern now has exactly `entries`."""
        now = {AclBinding(pattern, e) for e in entries}
        before = {b for b in self.metadata.acls if b.pattern == pattern}
        self._apply_acls(now - before, before - now)

    def _apply_user(self, user: str, credentials: dict[str, ScramCredential]) -> None:
        stored = self.metadata.scram_credentials
        for mechanism in sz.SCRAM_MECHANISMS:
            credential = credentials.get(mechanism)
            if credential is None:
                stored.pop((user, mechanism), None)
            else:
                stored[(user, mechanism)] = credential

    # --- notifications -----------------------------------------------------------------------------------

    def _poke(self) -> None:
        task = asyncio.get_running_loop().create_task(self._catch_up())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _catch_up(self) -> None:
        """Handle the notifications not handled yet, in order (one catch-up at a time)."""
        async with self._lock:
            for path, prefix in _CHANGE_SOURCES:
                try:
                    await self._catch_up_on(path, prefix)
                except asyncio.CancelledError:
                    raise
                except (ExactlyError, KazooException, OSError) as e:
                    log.warning("reading the notifications of %s failed (%s); at the next one", path, e)
                except Exception:
                    log.exception("reading the notifications of %s failed", path)

    async def _catch_up_on(self, path: str, prefix: str) -> None:
        children = await self._children(path)
        new = sorted(
            (n, c)
            for c in children
            if (n := sz.change_sequence(c, prefix)) is not None and n > self._last.get(path, -1)
        )
        for number, child in new:
            found = await self.zk.get(f"{path}/{child}")
            if found is not None:
                try:
                    await self._handle(path, found[0])
                except ZnodeFormatError as e:
                    log.error("notification %s/%s is unreadable: %s", path, child, e)
            self._last[path] = number
        handled = handled_notifications(children, prefix, self._last.get(path, -1))
        await purge_obsolete_notifications(self.zk, path, handled, self.wall_ms())

    async def _handle(self, path: str, data: bytes) -> None:
        if path == CONFIG_CHANGES:
            user = sz.user_of_entity_path(ConfigChangeNotification.decode(data).entity_path)
            if user is not None:
                self._apply_user(user, await self._read_scram(user))
            return
        pattern = sz.decode_acl_change(data, extended=path == sz.EXTENDED_ACL_CHANGES)
        self._apply_pattern(pattern, await self._read_acls(pattern))

    # --- writing (the handlers) --------------------------------------------------------------------------

    async def create_acls(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        """Add the bindings (to the znode of each one's pattern); returns those that were not there."""
        return await self._change_acls(bindings, add=True)

    async def delete_acls(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        """Remove the bindings; returns those that were there."""
        return await self._change_acls(bindings, add=False)

    async def _change_acls(self, bindings: Iterable[AclBinding], *, add: bool) -> list[AclBinding]:
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for b in bindings:
            by_pattern.setdefault(b.pattern, set()).add(b.entry)
        changed: list[AclBinding] = []
        try:
            for pattern, entries in by_pattern.items():
                before, after = await self._update_pattern(pattern, entries, add)
                delta = (after - before) if add else (before - after)
                changed.extend(AclBinding(pattern, e) for e in sorted(delta, key=str))
                if before != after:
                    await self.zk.create(
                        f"{sz.acl_changes_path(pattern.pattern_type)}/{sz.CHANGE_PREFIX}",
                        sz.encode_acl_change(pattern),
                        sequence=True,
                    )
                async with self._lock:  # in order with the notifications: ZooKeeper's current state
                    self._apply_pattern(pattern, await self._read_acls(pattern))
        except (ConnectionLoss, SessionExpiredError):
            raise  # ZooKeeper out of reach: the caller waits for it (ClusterMember.change_*)
        except (ExactlyError, KazooException, OSError) as e:
            raise SecurityStoreError(f"cannot write the ACLs to ZooKeeper: {e}") from e
        return changed

    async def _update_pattern(
        self, pattern: ResourcePattern, entries: set[AccessControlEntry], add: bool
    ) -> tuple[frozenset[AccessControlEntry], frozenset[AccessControlEntry]]:
        """Kafka's `updateResourceAcls`: read, change, write back if the version is unchanged; retry."""
        path = sz.acl_path(pattern)
        while True:
            found = await self.zk.get(path)
            before = sz.decode_acls(found[0]) if found is not None else frozenset()
            after = (before | entries) if add else (before - entries)
            if after == before:
                return before, after
            try:
                if found is None:
                    await self.zk.create(path, sz.encode_acls(after), makepath=True)
                elif after:
                    await self.zk.set(path, sz.encode_acls(after), version=found[1].version)
                else:
                    await self.zk.delete(path, version=found[1].version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another broker wrote it meanwhile: again from its new state
            return before, after

    async def set_scram_credential(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        await self._change_user(user, mechanism, credential)

    async def delete_scram_credential(self, user: str, mechanism: str) -> None:
        await self._change_user(user, mechanism, None)

    async def _change_user(self, user: str, mechanism: str, credential: ScramCredential | None) -> None:
        path = sz.user_config_path(user)
        try:
            while True:
                config, version = await self._read_user(user)
                updated = sz.with_scram(config, mechanism, credential)
                data = EntityConfig(updated).encode()
                try:
                    if version is None:
                        await self.zk.create(path, data, makepath=True)
                    else:
                        await self.zk.set(path, data, version=version)
                except (BadVersionError, NodeExistsError, NoNodeError):
                    continue
                break
            await self.zk.create(
                f"{CONFIG_CHANGES}/{sz.CONFIG_CHANGE_PREFIX}",
                ConfigChangeNotification(sz.user_entity_path(user)).encode(),
                sequence=True,
            )
            async with self._lock:  # in order with the notifications: ZooKeeper's current state
                self._apply_user(user, await self._read_scram(user))
        except (ConnectionLoss, SessionExpiredError):
            raise  # ZooKeeper out of reach: the caller waits for it (ClusterMember.change_*)
        except (ExactlyError, KazooException, OSError) as e:
            raise SecurityStoreError(f"cannot write the SCRAM credential to ZooKeeper: {e}") from e
