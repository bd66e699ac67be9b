"""`exactly log-dirs describe` against the real broker: the data dir, its space, and partition sizes that
equal the segment files on disk."""

from __future__ import annotations

import os

import pytest

from exactly.testing.processes import BrokerProcess, free_port
from tests.cli.helpers import Result, assert_one_line_error, run_cli
from tests.interop.support import create_topic

pytestmark = pytest.mark.interop


def tables(result: Result) -> tuple[list[list[str]], list[list[str]]]:
    assert result.returncode == 0, result
    dirs_text, _, partitions_text = result.out.partition("\n\n")
    dirs = [line.split() for line in dirs_text.splitlines()]
    partitions = [line.split() for line in partitions_text.splitlines()]
    return dirs, partitions


def test_describe_log_dirs(shared_broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, "sized", 2)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce("sized", value=b"%04d" % i * 50, partition=1)
    assert producer.flush(20) == 0

    dirs, partitions = tables(run_cli("log-dirs", "describe", "--topic", "sized", bootstrap=bootstrap))
    data_dir = os.path.abspath(shared_broker.data_dir)
    assert dirs[0] == ["BROKER", "LOG-DIR", "ERROR", "TOTAL-BYTES", "USABLE-BYTES"]
    ((broker, log_dir, error, total, usable),) = dirs[1:]
    assert (broker, log_dir, error) == ("0", data_dir, "0")
    assert int(total) >= int(usable) > 0
    assert partitions[0] == ["TOPIC", "PARTITION", "SIZE", "OFFSET-LAG", "IS-FUTURE", "LOG-DIR"]
    on_disk = sum(
        f.stat().st_size for f in (shared_broker.data_dir / "sized-1").iterdir() if f.suffix == ".log"
    )
    assert on_disk > 20 * 200
    assert partitions[1:] == [
        ["sized", "0", "0", "0", "false", data_dir],
        ["sized", "1", str(on_disk), "0", "false", data_dir],
    ]


def test_unreachable_broker_is_one_line() -> None:
    result = run_cli("log-dirs", "describe", bootstrap=f"127.0.0.1:{free_port()}")
    assert_one_line_error(result, "cannot reach the broker")
