"""The marker channel's decisions (Kafka's `TransactionMarkerChannelManager` grouping and its
`TransactionMarkerRequestCompletionHandler` error handling), sans-IO.

A transaction's COMMIT/ABORT markers go to the leader of each of its partitions: those this broker leads
are appended locally, the others are sent in one WriteTxnMarkers request per destination broker. What
to do with each partition's answer is decided here:

* WRITTEN: the marker is in the leader's log and committed in its ISR.
* RETRY (after a fresh leader lookup and a backoff): the leader moved or is not known yet
  (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION), the ISR is too small or too slow
  (NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT), its disk failed
  (KAFKA_STORAGE_ERROR), or the request never got an answer (NETWORK_EXCEPTION: a disconnect), and any
  code not named below (Kafka throws on those; a coordinator that keeps trying cannot lose a marker).
* DROP: the partition saw a newer producer epoch (INVALID_PRODUCER_EPOCH) or a newer coordinator
  (TRANSACTION_COORDINATOR_FENCED): a newer transaction or coordinator has moved on, so this marker
  must not be written, and the transaction completes without it (as Kafka's does).

A partition whose topic was deleted is skipped by the caller, which alone knows the topic is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import Enum

from exactly.errors import ErrorCode

__all__ = ["NO_LEADER", "MarkerOutcome", "TopicPartition", "group_by_leader", "marker_outcome"]

NO_LEADER = -1

TopicPartition = tuple[str, int]


class MarkerOutcome(Enum):
    WRITTEN = "written"
    RETRY = "retry"
    DROP = "drop"


_DROPPED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})


def marker_outcome(code: ErrorCode) -> MarkerOutcome:
    """What the coordinator does with a partition's answer to its marker."""
    if code == ErrorCode.NONE:
        return MarkerOutcome.WRITTEN
    if code in _DROPPED:
        return MarkerOutcome.DROP
    return MarkerOutcome.RETRY


def group_by_leader(
    partitions: Iterable[TopicPartition], leader_of: Callable[[str, int], int]
) -> dict[int, list[TopicPartition]]:
    """The partitions by their current leader (NO_LEADER: none known now), each list sorted, so each
    destination gets one request."""
    out: dict[int, list[TopicPartition]] = {}
    for topic, index in sorted(set(partitions)):
        leader = leader_of(topic, index)
        out.setdefault(leader if leader >= 0 else NO_LEADER, []).append((topic, index))
    return out
