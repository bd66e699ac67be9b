"""Incremental fetch sessions (KIP-227), sans-IO: the broker's cache of what each consumer fetches.

A Fetch request carries `(session_id, session_epoch)` (Kafka's `FetchMetadata`):

| session_id | epoch | meaning                                                                  |
|------------|-------|--------------------------------------------------------------------------|
| 0          | -1    | sessionless full fetch (no session wanted)                               |
| 0          | 0     | full fetch that asks for a new session                                   |
| N          | 0     | close session N, full fetch, new session                                 |
| N          | -1    | close session N, sessionless full fetch                                  |
| N          | e > 0 | incremental fetch in session N; e must be the session's next epoch       |
| 0          | e > 0 | FETCH_SESSION_ID_NOT_FOUND                                               |

A full fetch reads exactly the partitions in the request; when it asked for a session and the cache has
room (`max.incremental.fetch.session.cache.slots`, Kafka's default 1000) the response carries the new id and
the next request may be incremental. An incremental request lists only partitions that are new or whose
fetch position changed, plus `forgotten_topics_data` to drop; the broker reads every partition of the
session and answers only those with something to say: records, an error, or a changed high watermark,
last stable offset or log start offset (Kafka's `CachedPartition.maybeUpdateResponseData`; Kafka does not
compare the LSO — we do, which only adds a partition to a response). A partition that returned records
moves to the end of the session's order, so that `max_bytes` does not starve the later ones.

Errors of an incremental request (no partitions in the response, session id 0): unknown session id →
FETCH_SESSION_ID_NOT_FOUND; wrong epoch → INVALID_FETCH_SESSION_EPOCH; a session created with topic names
(Fetch < v13) used with topic ids or the other way round → FETCH_SESSION_TOPIC_ID_ERROR.

The epoch moves when the request is accepted (Kafka's `FetchManager.newContext`), so a client may send the
next incremental request while the previous one waits in a long poll.

Eviction (Kafka's `FetchSessionCache.tryEvict`) happens only when a new session is wanted and the cache
is full: first the least recently used session if it has been idle longer than `eviction_ms` (Kafka's
`MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`, 120 s), otherwise the smallest session if the new one has
strictly more partitions; otherwise the new fetch is sessionless (session id 0 in the response). There
are no replicas here, so no session is privileged.
"""

from __future__ import annotations

import enum
import random
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from exactly.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
DEFAULT_CACHE_SLOTS = 1000
DEFAULT_EVICTION_MS = 120_000
_MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """Kafka's `FetchMetadata.nextEpoch`: epochs wrap from Integer.MAX_VALUE to 1, never back to 0."""
    if epoch < 0:
        return INITIAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


@dataclass(frozen=True, slots=True)
class PartitionKey:
    """A partition as the request names it: by topic name (Fetch < v13, `topic_id` zero) or by topic id
    (v13+, `topic` empty)."""

    topic_id: uuid.UUID
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class FetchPosition:
    """What a request says about one partition."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1  # Fetch v9+; -1: no check


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """What reading one partition gave: the fields a session compares with its cache."""

    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    record_bytes: int
    preferred_read_replica: int = -1  # KIP-392: always sent when set


class ContextKind(enum.Enum):
    SESSIONLESS = "sessionless"  # full fetch, no session wanted (epoch -1)
    FULL = "full"  # full fetch that creates a session if the cache allows
    INCREMENTAL = "incremental"  # fetch in an existing session
    ERROR = "error"  # answer with `error` and nothing else


@dataclass(frozen=True, slots=True)
class FetchContext:
    """How to answer one Fetch request: which partitions to read, in this order."""

    kind: ContextKind
    partitions: tuple[tuple[PartitionKey, FetchPosition], ...] = ()
    session_id: int = INVALID_SESSION_ID
    uses_topic_ids: bool = False
    error: ErrorCode = ErrorCode.NONE


@dataclass(slots=True)
class _CachedPartition:
    position: FetchPosition
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1

    def must_respond(self, result: PartitionResult) -> bool:
        """Whether `result` goes into an incremental response; remembers what it reported."""
        respond = (
            result.record_bytes > 0
            or result.error_code != ErrorCode.NONE
            or result.preferred_read_replica >= 0
        )
        if self.high_watermark != result.high_watermark:
            respond = True
            self.high_watermark = result.high_watermark
        if self.last_stable_offset != result.last_stable_offset:
            respond = True
            self.last_stable_offset = result.last_stable_offset
        if self.log_start_offset != result.log_start_offset:
            respond = True
            self.log_start_offset = result.log_start_offset
        if result.error_code != ErrorCode.NONE:
            self.high_watermark = -1  # resend the partition once the error goes away
        return respond


@dataclass(slots=True)
class FetchSession:
    id: int
    epoch: int  # the epoch the next incremental request must carry
    uses_topic_ids: bool
    created_ms: int
    last_used_ms: int
    partitions: dict[PartitionKey, _CachedPartition] = field(default_factory=dict)

    def positions(self) -> tuple[tuple[PartitionKey, FetchPosition], ...]:
        return tuple((key, cached.position) for key, cached in self.partitions.items())


class FetchSessionCache:
    """Every open fetch session of the broker (one cache; Kafka shards it, which changes nothing here)."""

    def __init__(
        self,
        max_slots: int = DEFAULT_CACHE_SLOTS,
        eviction_ms: int = DEFAULT_EVICTION_MS,
        new_id: Callable[[], int] | None = None,
    ) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._sessions: dict[int, FetchSession] = {}
        rng = random.Random()
        self._new_id = new_id or (lambda: rng.randint(1, _MAX_EPOCH))
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def new_context(
        self,
        session_id: int,
        epoch: int,
        uses_topic_ids: bool,
        fetch: Sequence[tuple[PartitionKey, FetchPosition]],
        forgotten: Iterable[PartitionKey],
        now_ms: int,
    ) -> FetchContext:
        """Accept (or refuse) a request; an incremental one updates its session and advances the epoch."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self._sessions.pop(session_id, None)
            kind = ContextKind.FULL if epoch == INITIAL_EPOCH else ContextKind.SESSIONLESS
            return FetchContext(kind, _dedup(fetch), uses_topic_ids=uses_topic_ids)
        session = self._sessions.get(session_id)
        if session is None:
            return FetchContext(ContextKind.ERROR, error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext(ContextKind.ERROR, error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            return FetchContext(ContextKind.ERROR, error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        for key, position in fetch:  # then forgotten: a partition in both is dropped (Kafka's order)
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = _CachedPartition(position)
            else:
                cached.position = position
        for key in forgotten:
            session.partitions.pop(key, None)
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = now_ms
        return FetchContext(
            ContextKind.INCREMENTAL, session.positions(), session_id=session.id, uses_topic_ids=uses_topic_ids
        )

    def complete(
        self, context: FetchContext, results: dict[PartitionKey, PartitionResult], now_ms: int
    ) -> tuple[int, list[PartitionKey]]:
        """After reading: (session id for the response, partitions to put in it, in order).

        A FULL context creates its session here, remembering what this response reports; an
        INCREMENTAL one keeps only the partitions with something new."""
        if context.kind is ContextKind.ERROR:
            return INVALID_SESSION_ID, []
        if context.kind is ContextKind.SESSIONLESS:
            return INVALID_SESSION_ID, [key for key, _ in context.partitions]
        if context.kind is ContextKind.FULL:
            keys = [key for key, _ in context.partitions]
            session_id = self._maybe_create(context, results, now_ms)
            return session_id, keys
        session = self._sessions.get(context.session_id)
        if session is None:  # closed or evicted while this request was waiting: answer in full
            return INVALID_SESSION_ID, [key for key, _ in context.partitions if key in results]
        respond: list[PartitionKey] = []
        moved: list[PartitionKey] = []
        for key, _ in context.partitions:
            cached = session.partitions.get(key)
            result = results.get(key)
            if cached is None or result is None:  # forgotten by a later request meanwhile
                continue
            if cached.must_respond(result):
                respond.append(key)
                if result.record_bytes > 0:
                    moved.append(key)
        for key in moved:
            session.partitions[key] = session.partitions.pop(key)
        return session.id, respond

    def _maybe_create(
        self, context: FetchContext, results: dict[PartitionKey, PartitionResult], now_ms: int
    ) -> int:
        if self.max_slots <= 0:
            return INVALID_SESSION_ID
        if len(self._sessions) >= self.max_slots and not self._try_evict(len(context.partitions), now_ms):
            return INVALID_SESSION_ID
        session_id = self._new_id()
        while session_id == INVALID_SESSION_ID or session_id in self._sessions:
            session_id = self._new_id()
        session = FetchSession(session_id, next_epoch(INITIAL_EPOCH), context.uses_topic_ids, now_ms, now_ms)
        for key, position in context.partitions:
            cached = _CachedPartition(position)
            result = results.get(key)
            if result is not None:
                cached.must_respond(result)
            session.partitions[key] = cached
        self._sessions[session_id] = session
        return session_id

    def _try_evict(self, size: int, now_ms: int) -> bool:
        if not self._sessions:
            return False
        stale = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stale.last_used_ms > self.eviction_ms:
            victim = stale
        else:
            smallest = min(self._sessions.values(), key=lambda s: (len(s.partitions), s.id))
            if size <= len(smallest.partitions):
                return False
            victim = smallest
        del self._sessions[victim.id]
        self.evictions += 1
        return True


def _dedup(
    fetch: Sequence[tuple[PartitionKey, FetchPosition]],
) -> tuple[tuple[PartitionKey, FetchPosition], ...]:
    """A partition listed twice is read once, with its last position (Kafka keeps a map too)."""
    return tuple(dict(fetch).items())
