"""Batch decisions of the two-phase commit extension (docs/two-phase-commit.md): their records in
`__transaction_state`, and the in-memory table of what is decided.

A decision is recorded once per (query id, batch id) by CommitBatch, before any of its transactions
moves: after a crash, replaying the records re-drives the same outcome. It lives in the
`__transaction_state` partition of the query id (`abs(javaHashCode(query_id)) % partitions`), next to
transactional-id records, told apart by the key version. All integers are big-endian.

Key::

    int16   version              100 (a transactional-id key is version 0)
    string  query_id             int16 length + UTF-8
    int64   batch_id

Value::

    int16   version              0
    int32   winner count
    string  winner transactional id, count times (int16 length + UTF-8)
    int64   timestamp_ms         when the decision was recorded

A null value is a tombstone: the decision was pruned. CommitBatch of batch B prunes the query's
decisions below ``B - retain`` (`TxnConfig.decisions_retained_batches`, default 100, Spark's
``spark.sql.streaming.minBatchesToRetain``: Spark never replays a batch that old), appending their
tombstones in the same record batch as B's decision; loading a tombstone forgets the decision, and
compaction then drops the key. The query's `decided_hw` is kept (the newest decision is never pruned),
so a prepare for a pruned batch is still a zombie's.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from exactly.errors import CorruptRecordError, ProtocolError
from exactly.protocol import primitives as p

__all__ = [
    "DECISION_KEY_VERSION",
    "BatchDecisionRecord",
    "Decisions",
    "decode_decision_key",
    "decode_decision_value",
    "decode_decision_value_or_tombstone",
    "encode_decision_key",
    "encode_decision_value",
]

DECISION_KEY_VERSION = 100
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ERRORS = (struct.error, UnicodeDecodeError, ValueError, IndexError, ProtocolError)


@dataclass(frozen=True, slots=True)
class BatchDecisionRecord:
    """The decision of one batch of one query: the transactional ids that commit."""

    query_id: str
    batch_id: int
    winners: tuple[str, ...]
    timestamp_ms: int


def encode_decision_key(query_id: str, batch_id: int) -> bytes:
    return _I16.pack(DECISION_KEY_VERSION) + p.string(query_id) + _I64.pack(batch_id)


def decode_decision_key(raw: bytes | memoryview) -> tuple[str, int]:
    buf = memoryview(raw)
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version != DECISION_KEY_VERSION:
            raise CorruptRecordError(f"not a batch decision key (version {version})")
        query_id, pos = p.read_string(buf, 2)
        (batch_id,) = _I64.unpack_from(buf, pos)
    except _ERRORS as e:
        raise CorruptRecordError(f"bad batch decision key: {e}") from e
    if pos + 8 != len(buf):
        raise CorruptRecordError("batch decision key has trailing bytes")
    return query_id, int(batch_id)


def encode_decision_value(decision: BatchDecisionRecord) -> bytes:
    out = bytearray(_I16.pack(0))
    out += _I32.pack(len(decision.winners))
    for winner in decision.winners:
        out += p.string(winner)
    out += _I64.pack(decision.timestamp_ms)
    return bytes(out)


def decode_decision_value(
    query_id: str, batch_id: int, raw: bytes | memoryview | None
) -> BatchDecisionRecord:
    if raw is None:
        raise CorruptRecordError("batch decision without a value")
    buf = memoryview(raw)
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version != 0:
            raise CorruptRecordError(f"unknown batch decision value version {version}")
        (count,) = _I32.unpack_from(buf, 2)
        if count < 0 or count > len(buf):
            raise CorruptRecordError(f"bad winner count {count}")
        pos = 6
        winners: list[str] = []
        for _ in range(count):
            winner, pos = p.read_string(buf, pos)
            winners.append(winner)
        (timestamp,) = _I64.unpack_from(buf, pos)
    except _ERRORS as e:
        raise CorruptRecordError(f"bad batch decision value: {e}") from e
    if pos + 8 != len(buf):
        raise CorruptRecordError("batch decision value has trailing bytes")
    return BatchDecisionRecord(query_id, batch_id, tuple(winners), int(timestamp))


def decode_decision_value_or_tombstone(
    query_id: str, batch_id: int, raw: bytes | memoryview | None
) -> BatchDecisionRecord | None:
    """The decision, or None for a tombstone (a pruned decision)."""
    return None if raw is None else decode_decision_value(query_id, batch_id, raw)


class Decisions:
    """The retained decisions, and per query the highest decided batch (`decided_hw`, kept when older
    decisions are pruned)."""

    def __init__(self) -> None:
        self._by_batch: dict[tuple[str, int], BatchDecisionRecord] = {}
        self._by_query: dict[str, set[int]] = {}  # query -> its retained decided batches
        self._hw: dict[str, int] = {}

    def add(self, decision: BatchDecisionRecord) -> None:
        key = (decision.query_id, decision.batch_id)
        if key in self._by_batch:
            return  # decided once: a replayed duplicate changes nothing
        self._by_batch[key] = decision
        self._by_query.setdefault(decision.query_id, set()).add(decision.batch_id)
        self._hw[decision.query_id] = max(self._hw.get(decision.query_id, -1), decision.batch_id)

    def prunable(self, query_id: str, below: int) -> list[int]:
        """The query's retained decided batches older than `below` (never its highest), ascending."""
        hw = self._hw.get(query_id, -1)
        return sorted(b for b in self._by_query.get(query_id, ()) if b < below and b != hw)

    def remove(self, query_id: str, batch_id: int) -> None:
        """Forget one decision (pruned, or a tombstone loaded); `decided_hw` stays."""
        if self._by_batch.pop((query_id, batch_id), None) is None:
            return
        batches = self._by_query.get(query_id)
        if batches is not None:
            batches.discard(batch_id)
            if not batches:
                del self._by_query[query_id]

    def batches(self, query_id: str) -> list[int]:
        """The query's retained decided batches, ascending."""
        return sorted(self._by_query.get(query_id, ()))

    def get(self, query_id: str, batch_id: int) -> BatchDecisionRecord | None:
        return self._by_batch.get((query_id, batch_id))

    def decided_hw(self, query_id: str) -> int:
        """The highest decided batch of the query, -1 when none is."""
        return self._hw.get(query_id, -1)

    def all(self) -> list[BatchDecisionRecord]:
        return sorted(self._by_batch.values(), key=lambda d: (d.query_id, d.batch_id))

    def remove_queries(self, keep: Callable[[str], bool]) -> None:
        """Forget every decision of the queries `keep` refuses (their partition moved to another broker)."""
        self._by_batch = {key: d for key, d in self._by_batch.items() if keep(key[0])}
        self._by_query = {query: batches for query, batches in self._by_query.items() if keep(query)}
        self._hw = {query: hw for query, hw in self._hw.items() if keep(query)}

    def __len__(self) -> int:
        return len(self._by_batch)
