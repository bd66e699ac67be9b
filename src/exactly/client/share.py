"""A share group consumer at the protocol level (KIP-932), whose acknowledgements can be handed to a
transaction: exactly's transactional share-acknowledgement extension (docs/share-transactional-acks.md).

confluent-kafka 2.16's `ShareConsumer` (librdkafka's) acknowledges only through its own share session
and never tells its member id, so its acquired records cannot be acknowledged by another API: a
consume → transform → produce worker that wants its acknowledgements inside its producer's transaction
uses this consumer, and `TransactionalShareAck` (or `TransactionalProducer.send_share_acks`) to add them.

* `ShareConsumer.poll(max_records, max_wait_ms)`: ShareGroupHeartbeat v1 when due (joins with epoch 0 at
  first), then ShareFetch v1 on the assigned partitions (session epoch 0, then 1, 2...); returns the
  acquired records (`ShareRecord`, with topic, topic id, partition, offset, delivery count). Plain
  acknowledgements (`acknowledge`) ride on the next ShareFetch, as librdkafka's do.
* `TransactionalShareAck(producer).acknowledge(consumer, records, ack_type)`: AddShareAcksToTxn v0 for
  the records, in the producer's open transaction; the producer's commit applies them.
* `close()`: ShareFetch with epoch -1 (the session's other records are released) and a leaving heartbeat.

Requests go to one broker: the bootstrap, which must lead the consumed partitions (a single broker, as in
exactly's tests). Blocking, not thread-safe.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from exactly.client.connection import KafkaConnection
from exactly.client.txn import TransactionalProducer
from exactly.errors import ErrorCode
from exactly.group.share.partition import AckType
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages import share_fetch as sf
from exactly.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from exactly.records.batch import iter_batches

__all__ = ["ShareConsumer", "ShareConsumerError", "ShareRecord", "TransactionalShareAck"]

_CLOSE_EPOCH = -1


class ShareConsumerError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code


@dataclass(frozen=True, slots=True)
class ShareRecord:
    topic_id: uuid.UUID
    partition: int
    offset: int
    delivery_count: int
    key: bytes | None
    value: bytes | None


class ShareConsumer:
    def __init__(
        self,
        bootstrap: str,
        group_id: str,
        topics: Sequence[str],
        *,
        member_id: str | None = None,
        timeout_s: float = 30.0,
        client_id: str = "exactly-share",
    ) -> None:
        host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
        self.group_id = group_id
        self.topics = list(topics)
        self.member_id = member_id or str(uuid.uuid4())
        self.member_epoch = 0
        self.assignment: list[tuple[uuid.UUID, int]] = []
        self._address = (host, int(port))
        self._timeout_s = timeout_s
        self._client_id = client_id
        self._connection: KafkaConnection | None = None
        self._session_epoch = 0
        self._next_heartbeat = 0.0
        self._acks: dict[tuple[uuid.UUID, int], list[sf.AcknowledgementBatch]] = {}

    # --- membership ---------------------------------------------------------------------------------

    def heartbeat(self) -> None:
        request = ShareGroupHeartbeatRequest(
            self.group_id,
            self.member_id,
            self.member_epoch,
            subscribed_topic_names=self.topics if self.member_epoch == 0 else None,
        )
        response = self._request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, request)
        code = ErrorCode.of(response.error_code)
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
            self.member_epoch = 0  # join again
            self._next_heartbeat = 0.0
            return
        if code != ErrorCode.NONE:
            raise ShareConsumerError(
                code, f"ShareGroupHeartbeat of {self.group_id!r}: {response.error_message}"
            )
        self.member_epoch = response.member_epoch
        if response.assignment is not None:
            self.assignment = sorted(
                (tp.topic_id, p) for tp in response.assignment.topic_partitions for p in tp.partitions
            )
        self._next_heartbeat = time.monotonic() + max(response.heartbeat_interval_ms, 100) / 1000

    # --- fetching -------------------------------------------------------------------------------------

    def poll(self, max_records: int = 100, max_wait_ms: int = 500) -> list[ShareRecord]:
        """Heartbeat if due, then one ShareFetch: the records acquired (maybe none)."""
        if time.monotonic() >= self._next_heartbeat or self.member_epoch == 0:
            self.heartbeat()
        if not self.assignment:
            time.sleep(max_wait_ms / 1000)
            return []
        response = self._fetch(max_records, max_wait_ms)
        out: list[ShareRecord] = []
        for topic in response.responses:
            for p in topic.partitions:
                if p.error_code:
                    continue
                ranges = [(r.first_offset, r.last_offset, r.delivery_count) for r in p.acquired_records]
                if not ranges:
                    continue
                for batch in iter_batches(bytes(p.records), allow_partial=True):
                    if batch.is_control:
                        continue
                    for record in batch.records():
                        count = next((c for f, last, c in ranges if f <= record.offset <= last), 0)
                        if count:
                            out.append(
                                ShareRecord(
                                    topic.topic_id,
                                    p.partition_index,
                                    record.offset,
                                    count,
                                    record.key,
                                    record.value,
                                )
                            )
        return out

    def acknowledge(self, records: Iterable[ShareRecord], ack_type: AckType = AckType.ACCEPT) -> None:
        """Plain acknowledgements, sent with the next ShareFetch (or `close`)."""
        for r in records:
            batch = sf.AcknowledgementBatch(r.offset, r.offset, [int(ack_type)])
            self._acks.setdefault((r.topic_id, r.partition), []).append(batch)

    def _fetch(self, max_records: int, max_wait_ms: int, epoch: int | None = None) -> Any:
        session_epoch = self._session_epoch if epoch is None else epoch
        partitions = sorted(set(self.assignment) | set(self._acks))
        by_topic: dict[uuid.UUID, list[sf.FetchPartition]] = {}
        for topic_id, index in partitions:
            acks = self._acks.pop((topic_id, index), []) if session_epoch != 0 else []
            by_topic.setdefault(topic_id, []).append(sf.FetchPartition(index, acks))
        request = sf.ShareFetchRequest(
            self.group_id,
            self.member_id,
            session_epoch,
            max_wait_ms=max_wait_ms,
            max_records=max_records,
            batch_size=max_records,
            topics=[sf.FetchTopic(t, ps) for t, ps in by_topic.items()],
        )
        response = self._request(ApiKey.SHARE_FETCH, 1, request)
        code = ErrorCode.of(response.error_code)
        if code in (ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH):
            self._session_epoch = 0  # open a new session next time (the old one's records come back)
            return sf.ShareFetchResponse()
        if code != ErrorCode.NONE:
            raise ShareConsumerError(code, f"ShareFetch of {self.group_id!r}: {response.error_message}")
        if epoch is None:
            self._session_epoch += 1
        return response

    def close(self) -> None:
        """Close the share session (releasing what it holds) and leave the group."""
        try:
            if self._session_epoch > 0:
                self._fetch(0, 0, _CLOSE_EPOCH)
            if self.member_epoch > 0:
                self.member_epoch = -1
                self._request(
                    ApiKey.SHARE_GROUP_HEARTBEAT,
                    1,
                    ShareGroupHeartbeatRequest(self.group_id, self.member_id, -1),
                )
        except (OSError, ConnectionError, ShareConsumerError):
            pass
        finally:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _request(self, key: ApiKey, version: int, request: Any) -> Any:
        deadline = time.monotonic() + self._timeout_s
        if self._connection is None:
            self._connection = KafkaConnection.open(
                *self._address, client_id=self._client_id, timeout=self._timeout_s
            )
        try:
            return self._connection.request(key, version, request, deadline=deadline)
        except (OSError, ConnectionError):
            self._connection.close()
            self._connection = None
            raise

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class TransactionalShareAck:
    """Adds a share consumer's acknowledgements to a transactional producer's open transaction."""

    def __init__(self, producer: TransactionalProducer) -> None:
        self.producer = producer

    def acknowledge(
        self, consumer: ShareConsumer, records: Iterable[ShareRecord], ack_type: AckType = AckType.ACCEPT
    ) -> None:
        """AddShareAcksToTxn for `records` (acquired by `consumer`): applied when the producer commits,
        released when it aborts. TransactionError with the broker's code otherwise (INVALID_RECORD_STATE:
        a record's lock expired, or its ack is already pending; PRODUCER_FENCED...)."""
        ranges: dict[tuple[uuid.UUID, int], list[tuple[int, int, list[int]]]] = {}
        for r in sorted(records, key=lambda r: (str(r.topic_id), r.partition, r.offset)):
            batches = ranges.setdefault((r.topic_id, r.partition), [])
            if batches and batches[-1][1] == r.offset - 1:
                batches[-1] = (batches[-1][0], r.offset, batches[-1][2])
            else:
                batches.append((r.offset, r.offset, [int(ack_type)]))
        if ranges:
            self.producer.send_share_acks(consumer.group_id, consumer.member_id, ranges)
