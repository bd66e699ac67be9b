"""Share sessions (KIP-932): which share partitions a member fetches from one broker, and the epoch
that orders its ShareFetch / ShareAcknowledge requests (Kafka's `ShareSessionCache`).

A session is keyed by (group id, member id). Epoch 0 opens one (replacing an older session of the
key, whose partitions the caller releases), and each following request carries the next epoch: the
first after opening is 1. A request at another epoch is INVALID_SHARE_SESSION_EPOCH; a request for a key
with no session SHARE_SESSION_NOT_FOUND; -1 closes it (its acknowledgements are applied first). The
cache holds at most `max_sessions` (group.share.max.share.sessions); a new session beyond that evicts
the least recently used one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from exactly.errors import ErrorCode

__all__ = ["CLOSE_EPOCH", "OPEN_EPOCH", "ShareSession", "ShareSessionCache", "TopicPartitionId"]

OPEN_EPOCH = 0
CLOSE_EPOCH = -1

TopicPartitionId = tuple[uuid.UUID, int]


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    next_epoch: int = 1
    partitions: set[TopicPartitionId] = field(default_factory=set)
    last_used: int = 0


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._uses = 0

    def open(self, group_id: str, member_id: str) -> tuple[ShareSession, list[ShareSession]]:
        """Epoch 0: a new session; also returns the sessions it replaced or evicted (to release)."""
        gone: list[ShareSession] = []
        old = self.sessions.pop((group_id, member_id), None)
        if old is not None:
            gone.append(old)
        if len(self.sessions) >= self.max_sessions:
            oldest = min(self.sessions.values(), key=lambda s: s.last_used)
            gone.append(self.sessions.pop((oldest.group_id, oldest.member_id)))
        session = ShareSession(group_id, member_id, last_used=self._touch())
        self.sessions[(group_id, member_id)] = session
        return session, gone

    def continue_(self, group_id: str, member_id: str, epoch: int) -> tuple[ErrorCode, ShareSession | None]:
        """A request at `epoch` (> 0, or -1 to close): the session, or the error to answer."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        if epoch == CLOSE_EPOCH:
            return ErrorCode.NONE, session
        if epoch != session.next_epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        session.next_epoch += 1
        session.last_used = self._touch()
        return ErrorCode.NONE, session

    def close(self, session: ShareSession) -> None:
        self.sessions.pop((session.group_id, session.member_id), None)

    def _touch(self) -> int:
        self._uses += 1
        return self._uses
