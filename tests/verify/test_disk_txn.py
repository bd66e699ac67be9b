"""A transaction against the disk-fault model (exactly.verify.disk): the broker is killed (-9) after it
answered AddPartitionsToTxn on append but before the Ongoing record's fsync, and the files are cut back to
what was fsynced (the worst power loss the ledger allows). The partition's membership may be lost with
the record, but then nothing of the transaction reached the data partition either (the Produce waited for
the record before it appended): no hanging transaction, nothing acknowledged lost."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from exactly.client.connection import AsyncKafkaConnection
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from exactly.protocol.messages.init_producer_id import InitProducerIdRequest
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from exactly.testing.processes import BrokerProcess
from exactly.verify.disk import read_ledger
from tests.interop.support import create_topic, fetch_partition
from tests.storage.helpers import data_batch

TXN = "crash-txn"
DELAY_MS = 3000  # every __transaction_state fsync sleeps this long first


async def _answered_then_pending(port: int) -> float:
    """InitProducerId, AddPartitionsToTxn (its answer's latency is returned), then a transactional Produce
    that must still be unanswered (and unappended) while the Ongoing record waits for its fsync."""
    connection = await AsyncKafkaConnection.open("127.0.0.1", port)
    try:
        init = await connection.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(TXN, 60_000))
        assert init.error_code == ErrorCode.NONE
        pid, epoch = init.producer_id, init.producer_epoch
        started = time.monotonic()
        added = await connection.request(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            3,
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=TXN,
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[AddPartitionsToTxnTopic("tx", [0])],
            ),
        )
        latency = time.monotonic() - started
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        batch = data_batch(1, pid=pid, epoch=epoch, seq=0, txn=True)
        request = ProduceRequest(
            TXN, -1, 30_000, [TopicProduceData("tx", partition_data=[PartitionProduceData(0, batch)])]
        )
        produce = asyncio.ensure_future(connection.request(ApiKey.PRODUCE, 9, request))
        await asyncio.wait({produce}, timeout=(DELAY_MS / 1000) / 3)
        assert not produce.done(), "the Produce was answered before the Ongoing record was durable"
        produce.cancel()
        return latency
    finally:
        connection.close()


def _cut_to_durable(data: Path, ledger: Path) -> int:
    """Every file back to its fsynced length (one never fsynced: gone): what a power loss may leave."""
    durable = read_ledger(ledger)
    cut = 0
    for path in sorted(p for p in data.rglob("*") if p.is_file()):
        if path.resolve() == ledger.resolve():
            continue
        keep = durable.get(str(path.relative_to(data)))
        if keep is None:
            path.unlink()
            cut += 1
        elif path.stat().st_size > keep:
            with open(path, "r+b") as f:
                f.truncate(keep)
            cut += 1
    return cut


def test_a_crash_between_the_add_partitions_answer_and_its_fsync_leaves_no_hanging_transaction(
    tmp_path: Path,
) -> None:
    data, ledger = tmp_path / "data", tmp_path / "ledger"
    broker = BrokerProcess(
        data,
        f"exactly.debug.fsync.ledger={ledger}",
        f"exactly.debug.txn.state.flush.delay.ms={DELAY_MS}",
        "transaction.state.log.num.partitions=1",
    )
    broker.start()
    try:
        create_topic(broker.bootstrap, "tx", 1)
        latency = asyncio.run(_answered_then_pending(broker.port))
        assert latency < DELAY_MS / 1000 / 2  # answered on append, not after the (delayed) fsync
        broker.kill()  # before the Ongoing record's fsync
        state = [p for p in data.rglob("*.log") if "__transaction_state" in str(p)]
        assert state
        assert _cut_to_durable(data, ledger) > 0
        broker = BrokerProcess(data, port=broker.port)
        broker.start()
        dump = fetch_partition(broker.bootstrap, "tx", 0)
        assert dump.batches == []  # nothing of the transaction: no open transaction for anyone to end
        assert dump.high_watermark == 0
        committed = fetch_partition(broker.bootstrap, "tx", 0, isolation_level=1)
        assert committed.high_watermark == dump.high_watermark
    finally:
        broker.kill()
