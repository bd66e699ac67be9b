"""`TransactionService` built from its parts (no `Broker`): a commit's PrepareCommit is durable before
EndTxn is answered, its markers land in the data partitions through the replica manager, CompleteCommit
follows, and a new service over the same logs restores the id; a partition that is no longer ours
answers NOT_COORDINATOR and leaves the id as it was; a decided transaction's markers are resumed at
start-up."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from exactly.broker.handling import Handling
from exactly.broker.transactions import TRANSACTION_TOPIC, TransactionService
from exactly.cluster.producer_ids import ProducerIdManager
from exactly.errors import ErrorCode
from exactly.records.batch import iter_batches
from exactly.records.control import ControlRecordType, parse_end_txn_marker
from exactly.storage import files
from exactly.storage.log import Isolation
from exactly.txn import TxnState
from tests.broker.parts import Parts, build_parts, until
from tests.storage.helpers import data_batch

TXN = "tx"


def _service(parts: Parts) -> TransactionService:
    return TransactionService(
        parts.config,
        parts.replicas,
        parts.topics,
        parts.clock,
        parts.scheduler,
        ProducerIdManager(parts.metadata).next_id,
    )


async def _begin(parts: Parts, service: TransactionService) -> tuple[int, int]:
    """InitProducerId, AddPartitions(data-0), and a transactional batch in data-0."""
    if not parts.topics.partitions("data"):
        await parts.topics.create_topic("data", 1, {})
    init = await service.run(TXN, lambda c: c.init_producer_id(TXN, 60_000))
    assert init.error == ErrorCode.NONE
    pid, epoch = init.producer_id, init.producer_epoch
    added = await service.run(TXN, lambda c: c.add_partitions(TXN, pid, epoch, [("data", 0)]))
    assert added.error == ErrorCode.NONE
    partition = parts.replicas.online_partition("data", 0)
    parts.replicas.append_records(partition, data_batch(2, pid=pid, epoch=epoch, seq=0, txn=True))
    return pid, epoch


def _markers(parts: Parts) -> list[tuple[int, ControlRecordType]]:
    partition = parts.replicas.online_partition("data", 0)
    read = partition.read(0, 1 << 20, Isolation.READ_UNCOMMITTED)
    return [
        (b.producer_id, parse_end_txn_marker(b).type)
        for b in iter_batches(bytes(read.records))
        if b.is_control
    ]


def test_a_commit_writes_markers_and_a_new_service_restores_it(tmp_path: Path) -> None:
    async def run() -> None:
        parts = build_parts(tmp_path, transaction_state_log_num_partitions="2")
        service = _service(parts)
        service.start()
        pid, epoch = await _begin(parts, service)
        ended = await service.run(TXN, lambda c: c.end_transaction(TXN, pid, epoch, True))
        assert ended.error == ErrorCode.NONE
        state_partition = parts.replicas.online_partition(
            TRANSACTION_TOPIC, service.coordinator.partition_for(TXN)
        )
        # Ongoing and PrepareCommit were fsynced before the answer
        assert state_partition.log.recovery_point >= 2
        await until(lambda: service.coordinator.transactions[TXN].state is TxnState.COMPLETE_COMMIT)
        assert _markers(parts) == [(pid, ControlRecordType.COMMIT)]
        data = parts.replicas.online_partition("data", 0)
        assert data.last_stable_offset == data.high_watermark == 3
        await service.stop()
        await parts.close()

        again = build_parts(tmp_path, transaction_state_log_num_partitions="2")
        restored = _service(again)
        restored.load()
        txn = restored.coordinator.transactions[TXN]
        assert (txn.state, txn.producer_id, txn.producer_epoch) == (TxnState.COMPLETE_COMMIT, pid, epoch)
        await again.close()

    asyncio.run(run())


def test_a_resigned_partition_answers_not_coordinator_until_it_is_led_again(tmp_path: Path) -> None:
    async def run() -> None:
        parts = build_parts(tmp_path, transaction_state_log_num_partitions="1")
        service = _service(parts)
        service.start()
        pid, epoch = await _begin(parts, service)
        service.runtime.resigned(0)  # the cluster moved __transaction_state-0 to another broker
        assert TXN not in service.coordinator.transactions  # its state went with the partition
        ended = await service.run(TXN, lambda c: c.end_transaction(TXN, pid, epoch, True))
        assert ended.error == ErrorCode.NOT_COORDINATOR
        assert _markers(parts) == []
        service.runtime.became_leader(0)  # back: the id is loaded from the log, still Ongoing
        txn = service.coordinator.transactions[TXN]
        assert (txn.state, txn.producer_id, txn.pending_state) == (TxnState.ONGOING, pid, None)
        ended = await service.run(TXN, lambda c: c.end_transaction(TXN, pid, epoch, False))
        assert ended.error == ErrorCode.NONE
        await until(lambda: _markers(parts) == [(pid, ControlRecordType.ABORT)])
        await service.stop()
        await parts.close()

    asyncio.run(run())


def test_markers_of_a_recorded_decision_are_resumed_at_start(tmp_path: Path) -> None:
    async def run() -> None:
        parts = build_parts(
            tmp_path, transaction_state_log_num_partitions="1", exactly_debug_end_txn_pause="prepare-written"
        )
        service = _service(parts)
        service.start()
        pid, epoch = await _begin(parts, service)
        ended = await service.run(TXN, lambda c: c.end_transaction(TXN, pid, epoch, True))
        assert ended.error == ErrorCode.NONE  # PrepareCommit durable; the marker job is parked
        assert _markers(parts) == []
        await service.stop()
        await parts.close()

        again = build_parts(tmp_path, transaction_state_log_num_partitions="1")
        resumed = _service(again)
        resumed.start()
        await until(lambda: resumed.coordinator.transactions[TXN].state is TxnState.COMPLETE_COMMIT)
        assert _markers(again) == [(pid, ControlRecordType.COMMIT)]
        await resumed.stop()
        await again.close()

    asyncio.run(run())


def _handled(tmp_path: Path) -> tuple[Parts, Handling, TransactionService]:
    """A started service whose flusher asks `Handling`, as the broker wires them (server.py)."""
    parts = build_parts(tmp_path, transaction_state_log_num_partitions="2")
    handling = Handling()
    parts.replicas.flusher.inline_when = handling.alone
    parts.replicas.flusher.answered = handling.answered
    service = _service(parts)
    service.start()
    return parts, handling, service


def test_end_txn_alone_has_its_markers_appended_after_its_answer(tmp_path: Path) -> None:
    """EndTxn (`answered_first`) while it is the one request handled: its markers are neither appended
    nor synced until its answer is written (its task done, then the writer's turn), so nothing but
    PrepareCommit's fsync stands between the request and its answer. Fails if the markers' task appends
    as soon as it runs."""

    async def run() -> None:
        parts, handling, service = _handled(tmp_path)
        pid, epoch = await _begin(parts, service)
        ended: list[ErrorCode] = []
        answer = asyncio.Event()

        async def end_txn() -> None:  # the request: answered when its task is done
            result = await service.run(
                TXN, lambda c: c.end_transaction(TXN, pid, epoch, True), answered_first=True
            )
            ended.append(result.error)
            await answer.wait()

        request = handling.start(asyncio.get_running_loop(), end_txn())
        await until(lambda: bool(ended))
        assert ended == [ErrorCode.NONE]
        for _ in range(20):  # the markers' task has run up to its wait
            await asyncio.sleep(0)
        data = parts.replicas.online_partition("data", 0)
        assert data.log.log_end_offset == 2  # the two records, no marker yet
        assert service.coordinator.transactions[TXN].state is TxnState.PREPARE_COMMIT
        answer.set()
        await request
        await until(lambda: service.coordinator.transactions[TXN].state is TxnState.COMPLETE_COMMIT)
        assert _markers(parts) == [(pid, ControlRecordType.COMMIT)]
        assert data.log.recovery_point == 3  # the marker was synced
        await service.stop()
        await parts.close()

    asyncio.run(run())


def test_the_next_request_of_the_id_is_not_what_end_txns_markers_wait_for(tmp_path: Path) -> None:
    """The client's next AddPartitionsToTxn arrives as EndTxn is answered and waits for the markers
    (CompleteCommit). The markers wait for EndTxn's answer only, not for whichever request ends next:
    that would be this one, and it would time out with CONCURRENT_TRANSACTIONS after a second."""

    async def run() -> None:
        parts, handling, service = _handled(tmp_path)
        pid, epoch = await _begin(parts, service)
        loop = asyncio.get_running_loop()

        async def end_txn() -> ErrorCode:
            ended = await service.run(
                TXN, lambda c: c.end_transaction(TXN, pid, epoch, True), answered_first=True
            )
            return ended.error

        async def add_partitions() -> ErrorCode:
            added = await service.run(TXN, lambda c: c.add_partitions(TXN, pid, epoch, [("data", 0)]))
            return added.error

        request = handling.start(loop, end_txn())
        request.add_done_callback(lambda _: nexts.append(handling.start(loop, add_partitions())))
        nexts: list[asyncio.Task[ErrorCode]] = []
        assert await request == ErrorCode.NONE
        await until(lambda: bool(nexts))
        assert await nexts[0] == ErrorCode.NONE
        assert _markers(parts) == [(pid, ControlRecordType.COMMIT)]
        assert service.coordinator.transactions[TXN].state is TxnState.ONGOING
        await service.stop()
        await parts.close()

    asyncio.run(run())


def test_a_request_cancelled_while_its_record_syncs_still_applies_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EndTxn's requester disconnects while PrepareCommit is being fsynced (its request is cancelled):
    the appended record is still applied once durable, the markers follow and the id completes, not
    left pending (nothing but CONCURRENT_TRANSACTIONS for it forever)."""
    syncing, release = threading.Event(), threading.Event()
    real_fsync = files.fsync

    def slow_fsync(fd: int, path: Path | str) -> None:
        if TRANSACTION_TOPIC in str(path) and not release.is_set():
            syncing.set()
            release.wait(10)
        real_fsync(fd, path)

    async def run() -> None:
        parts = build_parts(tmp_path, transaction_state_log_num_partitions="2")
        service = _service(parts)
        service.start()
        pid, epoch = await _begin(parts, service)
        monkeypatch.setattr(files, "fsync", slow_fsync)
        request = asyncio.create_task(service.run(TXN, lambda c: c.end_transaction(TXN, pid, epoch, True)))
        await until(syncing.is_set)
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
        assert service.coordinator.transactions[TXN].state is TxnState.ONGOING  # not applied yet
        release.set()
        await until(lambda: service.coordinator.transactions[TXN].state is TxnState.COMPLETE_COMMIT)
        assert _markers(parts) == [(pid, ControlRecordType.COMMIT)]
        txn = service.coordinator.transactions[TXN]
        assert txn.pending_state is None
        await service.stop()
        await parts.close()

    try:
        asyncio.run(run())
    finally:
        release.set()
