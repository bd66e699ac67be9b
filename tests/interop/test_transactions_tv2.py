"""Transaction version 2 (KIP-890 part 2) against a real broker, driven by exactly's protocol-level client
(`exactly.client.txn`; no Python client speaks TV2): the finalized feature in ApiVersions, EndTxn v5's
epoch bump, Produce v12 and TxnOffsetCommit v5 without AddPartitionsToTxn/AddOffsetsToTxn, a delayed and a
duplicated EndTxn that must not touch the next transaction (KAFKA-17754), the same through the fault
proxy, a TV1 client on the same broker, and `transaction.version=1` pinning clients to TV1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from exactly.client.txn import TransactionalProducer, TransactionError
from exactly.errors import ErrorCode
from exactly.protocol.api import decode_response
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.protocol.messages.end_txn import EndTxnRequest
from exactly.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from exactly.testing.processes import BrokerProcess, free_port
from exactly.verify.proxy import Action, FaultProxy, Rule
from tests.interop.client import RawClient
from tests.interop.support import create_topic, running_broker
from tests.interop.txn_support import READ_COMMITTED, READ_UNCOMMITTED, RawTxn, fetch_once, wait_for_state

END_TXN = 26


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("tv2") / "data") as proc:
        create_topic(proc.bootstrap, "tv2", 2)
        yield proc


def features(
    bootstrap: str, version: int = 3
) -> tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]]]:
    client = RawClient(bootstrap)
    try:
        response = client.request(ApiKey.API_VERSIONS, version, ApiVersionsRequest("test", "0"))
    finally:
        client.close()
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features}
    return supported, finalized


def committed(bootstrap: str, topic: str, partition: int) -> list[bytes | None]:
    return fetch_once(bootstrap, topic, partition, isolation=READ_COMMITTED).visible


def test_transaction_version_2_is_finalized(broker: BrokerProcess) -> None:
    assert features(broker.bootstrap, 3) == ({"transaction.version": (1, 2)}, {"transaction.version": (2, 2)})
    assert features(broker.bootstrap, 4)[0] == {"transaction.version": (0, 2)}


def test_a_tv2_transaction_bumps_the_epoch_and_adds_partitions_itself(broker: BrokerProcess) -> None:
    with TransactionalProducer(broker.bootstrap, "tv2-basic") as p:
        p.init()
        pid, epoch = p.producer_id, p.producer_epoch
        p.send("tv2", 0, [b"a1", b"a2"])
        p.send("tv2", 1, [b"b1"])  # no AddPartitionsToTxn: Produce v12 adds them
        p.send_offsets("tv2-group", {("tv2", 0): 2})  # no AddOffsetsToTxn: TxnOffsetCommit v5
        described = wait_for_state(broker.bootstrap, "tv2-basic", {"Ongoing"})
        partitions = {(t.topic, i) for t in described.topics for i in t.partitions}
        assert ("tv2", 0) in partitions
        assert ("tv2", 1) in partitions
        ended = p.commit()
        assert (ended.producer_id, ended.producer_epoch) == (pid, epoch + 1)
        assert ended.round_trips == 1
        p.send("tv2", 0, [b"a3"])  # the next transaction, at the new epoch, sequence 0
        p.abort()
        assert (p.producer_id, p.producer_epoch) == (pid, epoch + 2)
        assert committed(broker.bootstrap, "tv2", 1) == [b"b1"]
    visible = committed(broker.bootstrap, "tv2", 0)
    assert b"a3" not in visible
    assert visible[-2:] == [b"a1", b"a2"]
    client = RawClient(broker.bootstrap)
    try:
        offsets = client.request(
            ApiKey.OFFSET_FETCH,
            7,
            OffsetFetchRequest("tv2-group", [OffsetFetchRequestTopic("tv2", [0])], True),
        )
    finally:
        client.close()
    assert offsets.topics[0].partitions[0].committed_offset == 2


def test_a_delayed_and_a_duplicated_end_txn_do_not_touch_the_next_transaction(broker: BrokerProcess) -> None:
    """The EndTxn(commit) of T1 arrives again (a duplicate) after T1 ended, and again (delayed) while T2 is
    open: the first is a retry (same answer, nothing written), the second PRODUCER_FENCED; T2 is aborted by
    its client and none of it is ever visible."""
    with TransactionalProducer(broker.bootstrap, "tv2-late") as p:
        p.init()
        p.send("tv2", 1, [b"t1"])
        p.commit()
        old = p.last_end_request
        assert old is not None
        duplicate = p.end_txn(old)  # at once: T1's retry
        assert (duplicate.error_code, duplicate.producer_id, duplicate.producer_epoch) == (
            ErrorCode.NONE,
            p.producer_id,
            p.producer_epoch,
        )
        p.send("tv2", 1, [b"t2-0", b"t2-1"])
        before = wait_for_state(broker.bootstrap, "tv2-late", {"Ongoing"})
        for commit in (True, False):
            late = p.end_txn(EndTxnRequest(old.transactional_id, old.producer_id, old.producer_epoch, commit))
            assert (late.error_code, late.producer_id, late.producer_epoch) == (
                ErrorCode.PRODUCER_FENCED,
                -1,
                -1,
            )
        after = wait_for_state(broker.bootstrap, "tv2-late", {"Ongoing"})
        assert (after.producer_epoch, after.topics) == (before.producer_epoch, before.topics)
        p.abort()
        late = p.end_txn(old)
        assert late.error_code == ErrorCode.PRODUCER_FENCED
    visible = committed(broker.bootstrap, "tv2", 1)
    assert b"t1" in visible
    assert b"t2-0" not in visible
    assert b"t2-1" not in visible


def test_a_tv1_client_keeps_working_next_to_tv2(broker: BrokerProcess) -> None:
    with TransactionalProducer(broker.bootstrap, "tv1-here", transaction_version=1) as p:
        p.init()
        pid, epoch = p.producer_id, p.producer_epoch
        p.send("tv2", 0, [b"v1-a"])
        p.send_offsets("tv1-group", {("tv2", 0): 1})
        assert p.commit().producer_epoch == epoch  # TV1: no bump
        p.send("tv2", 0, [b"v1-b"])
        p.commit()
        assert (p.producer_id, p.producer_epoch) == (pid, epoch)
    with RawTxn(broker.bootstrap) as raw:
        # Produce v11 to a partition that was not added: refused (only v12 adds)
        code, pid, epoch = raw.init("tv1-unadded")
        assert code == ErrorCode.NONE
        assert raw.produce("tv1-unadded", pid, epoch, "tv2", 0, b"x") in (
            ErrorCode.INVALID_TXN_STATE,
            ErrorCode.TRANSACTION_ABORTABLE,
        )
    visible = committed(broker.bootstrap, "tv2", 0)
    assert b"v1-a" in visible
    assert b"v1-b" in visible
    assert b"x" not in visible


def test_a_fenced_tv2_producer_cannot_add_by_producing(broker: BrokerProcess) -> None:
    with TransactionalProducer(broker.bootstrap, "tv2-fenced") as old:
        old.init()
        with TransactionalProducer(broker.bootstrap, "tv2-fenced") as new:
            new.init()
            with pytest.raises(TransactionError) as e:
                old.send("tv2", 0, [b"zombie"])
            assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
            new.send("tv2", 0, [b"alive"])
            new.commit()
    assert b"zombie" not in fetch_once(broker.bootstrap, "tv2", 0, isolation=READ_UNCOMMITTED).values


def test_an_end_txn_duplicated_by_the_proxy_is_answered_as_a_retry(tmp_path: Path) -> None:
    """The nemesis's duplicated EndTxn (`proxy-duplicate`, kept off for TV1 clients: KAFKA-17754) against a
    TV2 client: every EndTxn reaches the broker twice; every transaction still ends as its client decided."""
    port = free_port()
    with (
        FaultProxy(("127.0.0.1", port), seed=7) as proxy,
        running_broker(tmp_path / "data", f"advertised.listeners=127.0.0.1:{proxy.port}", port=port) as b,
    ):
        create_topic(b.bootstrap, "dup", 1)
        proxy.keep_responses(frozenset({END_TXN}))
        proxy.add_rule(Rule(Action.DUPLICATE, frozenset({END_TXN})))
        with TransactionalProducer(proxy.bootstrap, "tv2-dup") as p:
            p.init()
            for i in range(6):
                p.send("dup", 0, [f"v{i}".encode()])
                if i % 2 == 0:
                    p.commit()
                else:
                    p.abort()
        codes = [
            decode_response(s.api_key, s.api_version, s.frame)[1].error_code
            for s in list(proxy.seen)
            if s.api_key == END_TXN
        ]
        assert proxy.stats[f"duplicate key {END_TXN}"] >= 6
        assert set(codes) <= {
            ErrorCode.NONE,
            ErrorCode.CONCURRENT_TRANSACTIONS,
            ErrorCode.PRODUCER_FENCED,
        }
        assert committed(b.bootstrap, "dup", 0) == [b"v0", b"v2", b"v4"]


def test_transaction_version_1_can_be_pinned(tmp_path: Path) -> None:
    with running_broker(tmp_path / "data", "transaction.version=1") as b:
        assert features(b.bootstrap) == ({"transaction.version": (1, 2)}, {"transaction.version": (1, 1)})
