"""The prepare step of an append (Kafka's `UnifiedLog.analyzeAndValidateProducerState`): assign offsets
to the batches of one append and check each producer's batches against its state, changing nothing.

For every batch with a producer id: a client batch that repeats one of the producer's last five batches
makes the whole append a duplicate (answered with the original offsets, nothing written); otherwise the
producer's `ProducerAppendInfo` checks epoch and sequence (data) or ends its transaction (a COMMIT/ABORT
marker). A producer's first transactional batch on the partition is first shown to the transaction
coordinator's verification guard (KIP-890 part 1). The log applies the result only once the batches are
written (`PartitionLog.append_as_leader`, step 3).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from exactly.errors import CorruptRecordError, KafkaError
from exactly.records.batch import RecordBatch
from exactly.records.control import parse_end_txn_marker
from exactly.storage.producer_state import (
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateManager,
)
from exactly.storage.validator import BatchInfo

# Called for the first transactional batch of a producer in an append with (producer_id, producer_epoch,
# base_sequence); raises KafkaError when the partition is not part of the producer's transaction.
VerificationGuard = Callable[[int, int, int], None]


@dataclass(slots=True)
class AppendAnalysis:
    placed: list[tuple[BatchInfo, int]] = field(default_factory=list)  # each batch and its base offset
    updates: dict[int, ProducerAppendInfo] = field(default_factory=dict)  # producer id -> its update
    completed: list[CompletedTxn] = field(default_factory=list)  # transactions the markers end
    next_offset: int = 0  # the log end offset after the append
    total_size: int = 0
    records: int = 0
    duplicate: BatchMetadata | None = None  # the whole append repeats this batch: write nothing


def analyze_append(
    producer_state: ProducerStateManager,
    infos: list[BatchInfo],
    view: memoryview,
    first_offset: int,
    max_timestamp: Callable[[BatchInfo], int],
    origin: AppendOrigin,
    verification_guard: VerificationGuard | None,
) -> AppendAnalysis:
    """Offsets from `first_offset`; `max_timestamp` gives a batch's stored max timestamp (LogAppendTime
    replaces the client's). Raises KafkaError for a batch its producer's state refuses."""
    plan = AppendAnalysis(next_offset=first_offset)
    verified: set[int] = set()
    for info in infos:
        base = plan.next_offset
        last = base + info.last_offset_delta
        pid = info.producer_id
        if pid >= 0:
            if origin is AppendOrigin.CLIENT:
                entry = producer_state.last_entry(pid)
                if entry is not None:
                    dup = entry.find_duplicate_batch(
                        info.producer_epoch, info.base_sequence, info.last_sequence
                    )
                    if dup is not None:
                        entry.check_duplicate_in_open_txn(dup, info.is_transactional)
                        plan.duplicate = dup
                        return plan
            upd = plan.updates.get(pid)
            if upd is None:
                upd = plan.updates[pid] = producer_state.prepare_update(pid, origin)
            if info.is_control:
                try:
                    marker = parse_end_txn_marker(RecordBatch(view, info.position))
                except CorruptRecordError as e:
                    raise KafkaError(e.code, str(e)) from e
                done = upd.append_end_txn_marker(marker, info.producer_epoch, base, max_timestamp(info))
                if done is not None:
                    plan.completed.append(done)
            else:
                if (
                    verification_guard is not None
                    and info.is_transactional
                    and pid not in verified
                    and upd.updated.current_txn_first_offset is None
                ):
                    verification_guard(pid, info.producer_epoch, info.base_sequence)
                    verified.add(pid)
                upd.append_data_batch(
                    info.producer_epoch,
                    info.base_sequence,
                    info.last_sequence,
                    max_timestamp(info),
                    base,
                    last,
                    info.is_transactional,
                )
        plan.placed.append((info, base))
        plan.next_offset = last + 1
        plan.total_size += info.size
        plan.records += info.records_count
    return plan
