"""The real broker with two log dirs: placement, AlterReplicaLogDirs with kafka-python's admin client while
a producer keeps writing, DescribeLogDirs during and after, `exactly log-dirs move`, and a restart."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exactly.testing.processes import BrokerProcess
from tests.cli.helpers import assert_one_line_error, run_cli
from tests.interop.support import create_topic, fetch_partition, running_broker

pytestmark = pytest.mark.interop

TIMEOUT = 20.0
NODE = 0


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("log-dirs")
    return [root / "d0", root / "d1"]


@pytest.fixture(scope="module")
def broker(dirs: list[Path]) -> Iterator[BrokerProcess]:
    with running_broker(dirs[0], "log.dirs=" + ",".join(map(str, dirs))) as proc:
        yield proc


@pytest.fixture(scope="module")
def kadmin(broker: BrokerProcess) -> Iterator[Any]:
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    yield client
    client.close()


def places(kadmin: Any, topic: str) -> dict[int, list[tuple[str, bool, int]]]:
    """partition -> [(log dir, is future, offset lag)] from DescribeLogDirs."""
    (result,) = kadmin.describe_log_dirs([topic])
    found: dict[int, list[tuple[str, bool, int]]] = {}
    for log_dir in result["log_dirs"]:
        assert log_dir["error_code"] == 0
        for t in log_dir["topics"]:
            for p in t["partitions"]:
                entry = (log_dir["log_dir"], p["is_future_key"], p["offset_lag"])
                found.setdefault(p["partition_index"], []).append(entry)
    return found


def test_both_dirs_are_described_and_partitions_spread(
    broker: BrokerProcess, kadmin: Any, dirs: list[Path]
) -> None:
    create_topic(broker.bootstrap, "spread", 4)
    (result,) = kadmin.describe_log_dirs(["spread"])
    assert [d["log_dir"] for d in result["log_dirs"]] == [os.path.abspath(d) for d in dirs]
    assert all(d["total_bytes"] >= d["usable_bytes"] > 0 for d in result["log_dirs"])
    where = places(kadmin, "spread")
    assert sorted(where) == [0, 1, 2, 3]
    per_dir = [sum(1 for p in where.values() if p[0][0] == os.path.abspath(d)) for d in dirs]
    assert per_dir == [2, 2]
    for d in dirs:
        assert (d / "meta.properties").read_text() == f"version=0\nbroker.id={NODE}\n"


def test_move_while_producing(broker: BrokerProcess, kadmin: Any, dirs: list[Path]) -> None:
    from confluent_kafka import Producer
    from kafka import TopicPartitionReplica
    from kafka.errors import NoError

    create_topic(broker.bootstrap, "moving", 1, {"segment.bytes": "262144"})
    (source,) = places(kadmin, "moving")[0]
    source_dir = Path(source[0])
    target_dir = next(d for d in dirs if os.path.abspath(d) != str(source_dir))
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 1, "batch.size": 65536}
    )
    delivered: list[bytes] = []
    failures: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            delivered.append(msg.value())

    for i in range(4000):  # ~1 MB before the move: it takes several copy steps
        producer.produce("moving", value=b"%06d" % i + b"." * 250, partition=0, on_delivery=on_delivery)
    assert producer.flush(TIMEOUT) == 0
    stop = threading.Event()

    def keep_producing() -> None:
        i = 4000
        while not stop.is_set():
            producer.produce("moving", value=b"%06d" % i + b"." * 250, partition=0, on_delivery=on_delivery)
            producer.poll(0)
            i += 1
            if i % 50 == 0:
                producer.flush(TIMEOUT)

    writer = threading.Thread(target=keep_producing)
    writer.start()
    try:
        replica = TopicPartitionReplica("moving", 0, NODE)
        assert kadmin.alter_replica_log_dirs({replica: str(target_dir.resolve())}) == {replica: NoError}
        seen: list[list[tuple[str, bool, int]]] = []
        deadline = time.monotonic() + TIMEOUT
        while True:
            now = places(kadmin, "moving")[0]
            seen.append(now)
            if now == [(os.path.abspath(target_dir), False, 0)]:
                break
            assert time.monotonic() < deadline, seen[-5:]
        written_during = len(delivered)
        # keep producing to the moved replica for a moment
        while len(delivered) < written_during + 200:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        stop.set()
        writer.join()
    assert producer.flush(TIMEOUT) == 0
    assert failures == []
    for state in seen[:-1]:  # while it moved: the current copy in the source dir, the future in the target
        assert (str(source_dir), False, 0) in state
        assert all(d == os.path.abspath(target_dir) for d, future, _ in state if future)
    dump = fetch_partition(broker.bootstrap, "moving", 0)
    assert dump.values == delivered  # every record, in order, from the new dir
    assert dump.high_watermark == len(delivered)
    assert not [n for n in os.listdir(source_dir) if n.startswith("moving-0")]  # the old copy is gone
    assert [n for n in os.listdir(target_dir) if n.startswith("moving-0")] == ["moving-0"]
    assert any(n.endswith(".log") for n in os.listdir(target_dir / "moving-0"))


def test_move_errors(broker: BrokerProcess, kadmin: Any, dirs: list[Path]) -> None:
    from kafka import TopicPartitionReplica
    from kafka.errors import LogDirNotFoundError, NoError, ReplicaNotAvailableError

    create_topic(broker.bootstrap, "errs", 1)
    ((here, _, _),) = places(kadmin, "errs")[0]
    ok = TopicPartitionReplica("errs", 0, NODE)
    assert kadmin.alter_replica_log_dirs({ok: here}) == {ok: NoError}  # already there: nothing happens
    assert places(kadmin, "errs")[0] == [(here, False, 0)]
    assert kadmin.alter_replica_log_dirs({ok: "/no/such/dir"}) == {ok: LogDirNotFoundError}
    missing = TopicPartitionReplica("no-such-topic", 0, NODE)
    assert kadmin.alter_replica_log_dirs({missing: here}) == {missing: ReplicaNotAvailableError}


def test_cli_move_and_restart(broker: BrokerProcess, kadmin: Any, dirs: list[Path]) -> None:
    create_topic(broker.bootstrap, "by-cli", 1)
    ((here, _, _),) = places(kadmin, "by-cli")[0]
    there = next(os.path.abspath(d) for d in dirs if os.path.abspath(d) != here)
    result = run_cli(
        "log-dirs",
        "move",
        "--topic",
        "by-cli",
        "--partition",
        "0",
        "--to",
        there,
        "--wait",
        bootstrap=broker.bootstrap,
    )
    assert result.returncode == 0, result
    assert result.out.strip() == f"moved by-cli-0 to {there} on broker {NODE}"
    failed = run_cli(
        "log-dirs",
        "move",
        "--topic",
        "by-cli",
        "--partition",
        "0",
        "--to",
        "/no/such/dir",
        bootstrap=broker.bootstrap,
    )
    assert_one_line_error(failed, "cannot move by-cli-0 to /no/such/dir", "LogDirNotFoundError")
    described = run_cli("log-dirs", "describe", "--topic", "by-cli", bootstrap=broker.bootstrap)
    assert described.returncode == 0, described
    assert ["by-cli", "0", "0", "0", "false", there] in [line.split() for line in described.out.splitlines()]
    # a restart loads both dirs: every partition where it was
    before = {topic: places(kadmin, topic) for topic in ("spread", "moving", "by-cli")}
    broker.stop(timeout=15)
    broker.start()
    kadmin.close()
    from kafka.admin import KafkaAdminClient

    again = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    try:
        assert {topic: places(again, topic) for topic in before} == before
    finally:
        again.close()
    assert fetch_partition(broker.bootstrap, "moving", 0).high_watermark > 4000
