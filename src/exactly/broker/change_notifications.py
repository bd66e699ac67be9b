"""Purging old change notifications (Kafka's `ZkNodeChangeNotificationListener.purgeObsoleteNotifications`).

ACL, SCRAM-credential, client-quota and dynamic-broker-config changes are announced by sequential znodes
(`/kafka-acl-changes/acl_changes_<n>`, `/kafka-acl-extended-changes/...`, `/config/changes/config_change_<n>`)
that every broker watches. Nothing else removes them, so, as Kafka does, each broker deletes the ones
created more than `NOTIFICATION_EXPIRATION_MS` (15 minutes, Kafka's `changeExpirationMs`) ago after it
has handled them: every broker has read them by then (one that was down reloads the whole state when it
starts, not the notifications). Deletes race harmlessly between brokers (a missing node is fine).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from exactly.broker.zookeeper import NoNodeError, ZooKeeper
from exactly.cluster.security_znodes import change_sequence

log = logging.getLogger(__name__)

__all__ = [
    "NOTIFICATION_EXPIRATION_MS",
    "handled_notifications",
    "is_obsolete",
    "purge_obsolete_notifications",
]

NOTIFICATION_EXPIRATION_MS = 15 * 60 * 1000


def is_obsolete(created_ms: int, now_ms: int, expiration_ms: int = NOTIFICATION_EXPIRATION_MS) -> bool:
    """A notification created at `created_ms` (the znode's ctime) may go at `now_ms`."""
    return created_ms + expiration_ms < now_ms


def handled_notifications(children: Iterable[str], prefix: str, last: int) -> list[str]:
    """The notification znodes among `children` (named `<prefix><sequence>`) handled up to `last`."""
    return [c for c in children if (n := change_sequence(c, prefix)) is not None and n <= last]


async def purge_obsolete_notifications(
    zk: ZooKeeper,
    path: str,
    handled: Iterable[str],
    now_ms: int,
    expiration_ms: int = NOTIFICATION_EXPIRATION_MS,
) -> int:
    """Delete the `handled` notifications (children of `path`) obsolete at `now_ms`; how many went."""
    purged = 0
    for name in handled:
        child = f"{path}/{name}"
        stat = await zk.exists(child)
        if stat is None or not is_obsolete(stat.ctime, now_ms, expiration_ms):
            continue
        try:
            await zk.delete(child)
        except NoNodeError:
            continue  # another broker purged it first
        purged += 1
    if purged:
        log.info(
            "purged %d change notification(s) older than %d s under %s", purged, expiration_ms // 1000, path
        )
    return purged
