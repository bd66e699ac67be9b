"""`exactly groups list|describe|lag|reset-offsets|delete` against a real broker, with a real consumer
group (a confluent-kafka member process). The sub-app runs in a subprocess, as `exactly groups` will
once it is registered in cli/main.py."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from exactly.testing.processes import BrokerProcess, free_port
from tests.cli.helpers import Result, assert_one_line_error
from tests.interop.groups_support import Member, committed_offsets, covers, produce, wait_until
from tests.interop.support import create_topic, running_broker

pytestmark = pytest.mark.interop

TOPIC, GROUP, PARTITIONS = "cli-t", "cli-g", 3


def groups(*args: str, bootstrap: str | None = None) -> Result:
    argv = list(args) + (["-b", bootstrap] if bootstrap else [])
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from exactly.cli.groups import groups_app; groups_app(prog_name='exactly groups')",
            *argv,
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr.decode(errors="replace"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("groups-cli") / "data"
    with running_broker(data, "group.initial.rebalance.delay.ms=0") as proc:
        yield proc


def test_groups_commands(broker: BrokerProcess, tmp_path: Path) -> None:
    b = broker.bootstrap
    empty = groups("list", bootstrap=b)
    assert (empty.returncode, empty.out) == (0, ""), empty
    create_topic(b, TOPIC, PARTITIONS)
    produce(b, TOPIC, [f"v{i}" for i in range(30)], PARTITIONS)
    member = Member("confluent", b, GROUP, TOPIC, "cli-member", tmp_path)
    try:
        wait_until(
            lambda: covers([member], PARTITIONS) and len(member.values) == 30,
            60,
            "consumed",
            describe=member.describe,
        )
        listed = groups("list", bootstrap=b)
        assert listed.out_lines == ["GROUP  TYPE     STATE", "cli-g  classic  Stable"], listed
        described = groups("describe", GROUP, bootstrap=b)
        assert described.returncode == 0, described
        assert "State: Stable" in described.out_lines[0]
        assert "Assignor: range" in described.out_lines[0]
        assert described.out_lines[1].split() == ["MEMBER", "INSTANCE", "CLIENT-ID", "HOST", "PARTITIONS"]
        row = described.out_lines[2].split()
        assert row[1:] == ["-", "cli-member", "/127.0.0.1", "cli-t-0,cli-t-1,cli-t-2"], described
        busy_reset = groups(
            "reset-offsets", GROUP, "--topic", TOPIC, "--to-earliest", "--execute", bootstrap=b
        )
        assert_one_line_error(busy_reset, "is Stable", "no active members")
        busy_delete = groups("delete", GROUP, bootstrap=b)
        assert_one_line_error(busy_delete, "has active members")
    finally:
        member.terminate()

    produce(b, TOPIC, [f"w{i}" for i in range(9)], PARTITIONS)
    lag = groups("lag", GROUP, bootstrap=b)
    assert lag.returncode == 0, lag
    assert lag.out_lines[0].split() == [
        "TOPIC",
        "PARTITION",
        "COMMITTED",
        "HIGH-WATERMARK",
        "LSO",
        "LAG",
        "LAG-LSO",
        "OWNER",
    ]
    assert [line.split() for line in lag.out_lines[1:4]] == [
        [TOPIC, str(p), "10", "13", "13", "3", "3", "-"] for p in range(PARTITIONS)
    ]
    assert lag.out_lines[4] == "total lag: 9 (behind the high watermark), 9 (behind the LSO)"

    dry = groups("reset-offsets", GROUP, "--topic", TOPIC, "--to-earliest", bootstrap=b)
    assert dry.returncode == 0, dry
    assert dry.out_lines[-1] == "dry run: add --execute to apply"
    assert committed_offsets(b, GROUP, TOPIC, PARTITIONS) == dict.fromkeys(range(PARTITIONS), 10)
    for args, expected in (
        (["--to-earliest"], dict.fromkeys(range(PARTITIONS), 0)),
        (["--shift-by", "5"], dict.fromkeys(range(PARTITIONS), 5)),
        (["--shift-by", "-7"], dict.fromkeys(range(PARTITIONS), 0)),  # clamped to the log start
        (["--to-offset", "100", "--partition", "1"], {0: 0, 1: 13, 2: 0}),  # clamped to the end
        (["--to-latest", "-p", "0", "-p", "2"], dict.fromkeys(range(PARTITIONS), 13)),
    ):
        done = groups("reset-offsets", GROUP, "--topic", TOPIC, *args, "--execute", bootstrap=b)
        assert done.returncode == 0, done
        assert done.out_lines[-1].startswith("reset "), done
        assert committed_offsets(b, GROUP, TOPIC, PARTITIONS) == expected, args

    assert_one_line_error(groups("reset-offsets", GROUP, "--topic", TOPIC, bootstrap=b), "exactly one of")
    assert_one_line_error(
        groups("reset-offsets", GROUP, "--topic", "nope", "--to-latest", bootstrap=b),
        "topic 'nope' does not exist",
    )
    assert_one_line_error(
        groups("reset-offsets", GROUP, "--topic", TOPIC, "-p", "9", "--to-latest", bootstrap=b),
        "no partition 9",
    )
    assert_one_line_error(groups("describe", "nope", bootstrap=b), "group 'nope' does not exist")
    assert groups("list", bootstrap=b).out_lines == ["GROUP  TYPE     STATE", "cli-g  classic  Empty"]
    deleted = groups("delete", GROUP, bootstrap=b)
    assert (deleted.returncode, deleted.out_lines) == (0, ["deleted group 'cli-g'"]), deleted
    assert committed_offsets(b, GROUP, TOPIC, PARTITIONS) == dict.fromkeys(range(PARTITIONS), -1)
    assert_one_line_error(groups("delete", GROUP, bootstrap=b), "group 'cli-g' does not exist")
    quiet = groups("delete", GROUP, "--if-exists", bootstrap=b)
    assert (quiet.returncode, quiet.out, quiet.stderr) == (0, "", ""), quiet


def test_unreachable_broker_is_one_line() -> None:
    result = groups("list", bootstrap=f"127.0.0.1:{free_port()}")
    assert_one_line_error(result, "cannot reach the broker")


def test_describe_a_consumer_protocol_group_shows_its_epochs(broker: BrokerProcess, tmp_path: Path) -> None:
    """A KIP-848 group (librdkafka with group.protocol=consumer): the protocol, the group and target
    epochs, and each member's epoch, current and target partitions."""
    b = broker.bootstrap
    topic, group = "cli-kip848", "cli-kip848-g"
    create_topic(b, topic, PARTITIONS)
    member = Member("confluent", b, group, topic, "cli-848", tmp_path, protocol="consumer")
    try:
        wait_until(lambda: covers([member], PARTITIONS), 60, "assigned", describe=member.describe)
        described = groups("describe", group, bootstrap=b)
        assert described.returncode == 0, described
        header, table = described.out_lines[0], described.out_lines[1:]
        for part in ("Protocol: consumer", "State: Stable", "Group epoch: 1", "Target epoch: 1"):
            assert part in header, header
        assert table[0].split() == [
            "MEMBER",
            "INSTANCE",
            "CLIENT-ID",
            "HOST",
            "PARTITIONS",
            "EPOCH",
            "TARGET",
        ]
        row = table[1].split()
        partitions = ",".join(f"{topic}-{p}" for p in range(PARTITIONS))
        assert (row[2], row[4:]) == ("cli-848", [partitions, "1", partitions]), row
    finally:
        member.kill()
