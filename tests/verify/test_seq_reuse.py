"""A sequence number reused after an abort (docs/verify-runs/seed-20261126-30m-all-faults.md,
cause 2), reproduced deterministically through the fault proxy with the verify worker's settings.

librdkafka 2.16: a transactional Produce is appended but its answer is lost (the connection closes);
every retry is reset, so the batch sits in the partition queue, flagged MsgPossiblyPersisted, when the
application gives up and calls abort_transaction. The abort purges it (_PURGE_QUEUE) and librdkafka
"advances the epoch base msgid due to 1 message(s) in aborted transaction" without an InitProducerId
epoch bump (KIP-360): the next transaction's first batch goes out with the same producer id, epoch and
sequence as the purged one. Kafka's duplicate check (same epoch, same sequence range among the last five
batches) would answer it with the old, aborted batch's offset and append nothing: an acknowledged,
committed record that is not in the log. The broker refuses such a transactional duplicate of an ended
transaction with OUT_OF_ORDER_SEQUENCE_NUMBER (ProducerStateEntry.check_duplicate_in_open_txn), which
librdkafka raises as a fatal error: the application makes a new producer instance, whose InitProducerId
bumps the epoch, and nothing acknowledged is lost."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from exactly.testing.processes import BrokerProcess, free_port
from exactly.verify.proxy import Action, FaultProxy, Rule
from tests.interop.support import create_topic, fetch_partition
from tests.interop.txn_support import fetch_once

PRODUCE = 0
READ_COMMITTED = 1
CONTROL = 0x20


def worker_producer(proxy: FaultProxy, txid: str) -> Producer:
    """The settings of exactly.verify.worker (transaction timeout 10 s, message timeout = it)."""
    return Producer(
        {
            "bootstrap.servers": proxy.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "request.timeout.ms": 5000,
            "transaction.timeout.ms": 10000,
            "message.timeout.ms": 10000,
            "socket.connection.setup.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 500,
            "transactional.id": txid,
        }
    )


@pytest.mark.slow
def test_a_sequence_reused_after_an_abort_is_refused_not_acknowledged(tmp_path: Path) -> None:
    port = free_port()
    reports: dict[bytes, tuple[KafkaError | None, int]] = {}

    def delivered(value: bytes) -> Any:
        def report(err: KafkaError | None, msg: Any) -> None:
            # only the err argument when it failed: the Message's methods raise with a fatal error pending
            reports[value] = (err, -1 if err is not None else msg.offset())

        return report

    with (
        FaultProxy(("127.0.0.1", port), seed=12) as proxy,
        BrokerProcess(tmp_path / "data", f"advertised.listeners=127.0.0.1:{proxy.port}", port=port) as broker,
    ):
        create_topic(broker.bootstrap, "t", 1)
        p = worker_producer(proxy, "reuse")
        p.init_transactions(15)
        p.begin_transaction()
        p.produce("t", b"first", partition=0, on_delivery=delivered(b"first"))
        p.commit_transaction(15)
        # T2: appended, the answer lost, every retry reset: the batch waits in librdkafka's queue
        proxy.add_rule(Rule(Action.DROP_RESPONSE, frozenset({PRODUCE}), limit=1))
        proxy.add_rule(Rule(Action.RESET, frozenset({PRODUCE})))
        p.begin_transaction()
        p.produce("t", b"lost", partition=0, on_delivery=delivered(b"lost"))
        assert p.flush(3) == 1
        assert proxy.stats[f"drop-response key {PRODUCE}"] == 1
        assert proxy.stats[f"reset key {PRODUCE}"] >= 1
        proxy.clear_rules()
        p.abort_transaction(15)
        lost_error, _ = reports[b"lost"]
        assert lost_error is not None
        assert lost_error.code() == KafkaError._PURGE_QUEUE
        # T3 on the same partition: librdkafka reuses the purged batch's epoch and sequence
        raised: KafkaException | None = None
        try:
            p.begin_transaction()
            p.produce("t", b"next", partition=0, on_delivery=delivered(b"next"))
            p.flush(15)
            p.commit_transaction(15)
        except KafkaException as e:
            raised = e
        dump = fetch_partition(broker.bootstrap, "t", 0)
        stored = {r.offset: r.value for b in dump.batches if not b.attributes & CONTROL for r in b.records}
        acked = {value: offset for value, (err, offset) in reports.items() if err is None}
        # every acknowledged record is in the log at the offset it was acknowledged with
        assert {value: stored.get(offset) for value, offset in acked.items()} == {v: v for v in acked}, (
            acked,
            stored,
        )
        assert b"lost" in stored.values()  # it was appended (then aborted)
        assert b"next" not in acked
        assert raised is not None
        failure: KafkaError = raised.args[0]
        assert failure.code() == KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, failure
        assert failure.fatal()
        with warnings.catch_warnings():  # close() warns that it could not abort: the instance is fatal
            warnings.simplefilter("ignore", RuntimeWarning)
            p.close()  # the application replaces the instance
        # a new instance bumps the epoch, aborts T3, and the id goes on
        p = worker_producer(proxy, "reuse")
        p.init_transactions(15)
        p.begin_transaction()
        p.produce("t", b"again", partition=0, on_delivery=delivered(b"again"))
        p.commit_transaction(15)
        assert fetch_once(broker.bootstrap, "t", 0, isolation=READ_COMMITTED).visible == [b"first", b"again"]
        assert reports[b"again"][0] is None
        p.close()
