"""`exactly topics|produce|consume` as subprocesses against a real broker; confluent-kafka's AdminClient
is the independent oracle for what the commands did."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from exactly.testing.processes import BrokerProcess, free_port
from tests.cli.helpers import assert_one_line_error, run_cli, run_in_process

pytestmark = pytest.mark.interop


def _configs(bootstrap: str, topic: str) -> dict[str, tuple[str | None, int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=20)
    return {name: (entry.value, entry.source) for name, entry in entries.items()}


def _partition_count(bootstrap: str, topic: str) -> int:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=20)
    return len(metadata.topics[topic].partitions)


def test_topics_create_list_describe_alter_delete(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap

    created = run_cli(
        "topics",
        "create",
        "orders",
        "--partitions",
        "3",
        "--config",
        "retention.ms=123456",
        bootstrap=bootstrap,
    )
    assert created.returncode == 0, created
    assert created.out_lines == ["created topic 'orders' with 3 partitions"]
    assert _partition_count(bootstrap, "orders") == 3
    assert _configs(bootstrap, "orders")["retention.ms"] == ("123456", 1)  # DYNAMIC_TOPIC_CONFIG
    quiet = run_cli("topics", "create", "orders", "--if-not-exists", bootstrap=bootstrap)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, b"", "")

    producer = Producer({"bootstrap.servers": bootstrap})
    for value in (b"a", b"b", b"c"):
        producer.produce("orders", value, partition=1)
    assert producer.flush(20) == 0

    # the global option instead of the environment variable
    listed = run_cli("-b", bootstrap, "topics", "list")
    assert listed.returncode == 0, listed
    assert "orders" in listed.out_lines

    described = run_cli("topics", "describe", "orders", "--config-sources", bootstrap=bootstrap)
    assert described.returncode == 0, described
    lines = described.out_lines
    header = lines[0].split("\t")
    assert header[0] == "Topic: orders"
    assert re.fullmatch(r"TopicId: [A-Za-z0-9_-]{22}", header[1]), header
    assert "PartitionCount: 3" in header
    assert "ReplicationFactor: 1" in header
    assert header[-1] == "Configs: retention.ms=123456"  # the non-default ones
    partition_lines = [line for line in lines if line.startswith("\tTopic: orders\tPartition: ")]
    assert [line.split("\t")[2] for line in partition_lines] == [
        "Partition: 0",
        "Partition: 1",
        "Partition: 2",
    ]
    assert [line.split("\t")[-2:] for line in partition_lines] == [
        ["StartOffset: 0", "EndOffset: 0"],
        ["StartOffset: 0", "EndOffset: 3"],
        ["StartOffset: 0", "EndOffset: 0"],
    ]
    assert all("\tLeader: 0\tReplicas: 0\tIsr: 0\t" in line for line in partition_lines)
    configs = {line.split()[0]: line.split()[1] for line in lines[lines.index("Configs:") + 1 :]}
    assert configs["retention.ms=123456"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy=delete"] == "DEFAULT_CONFIG"

    altered = run_cli(
        "topics",
        "alter",
        "orders",
        "--set",
        "segment.ms=3600000",
        "--delete",
        "retention.ms",
        "--partitions",
        "4",
        bootstrap=bootstrap,
    )
    assert altered.returncode == 0, altered
    assert altered.out_lines == [
        "altered topic 'orders': set segment.ms=3600000, deleted retention.ms, partitions=4"
    ]
    after = _configs(bootstrap, "orders")
    assert after["segment.ms"] == ("3600000", 1)
    assert after["retention.ms"][1] == 5  # back to DEFAULT_CONFIG
    assert _partition_count(bootstrap, "orders") == 4
    described = run_cli("topics", "describe", "orders", "--config-sources", bootstrap=bootstrap)
    assert "PartitionCount: 4" in described.out_lines[0]
    assert any(
        line.startswith("\tsegment.ms=3600000 ") and line.endswith("DYNAMIC_TOPIC_CONFIG")
        for line in described.out_lines
    )

    deleted = run_cli("topics", "delete", "orders", bootstrap=bootstrap)
    assert deleted.returncode == 0, deleted
    assert deleted.out_lines == ["deleted topic 'orders'"]
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20)
    assert "orders" not in metadata.topics
    # --if-exists makes the repeated operation a quiet success
    again = run_cli("topics", "delete", "orders", "--if-exists", bootstrap=bootstrap)
    assert (again.returncode, again.stdout, again.stderr) == (0, b"", "")


LINES = [
    b"first",
    b"",
    b"  spaces around  ",
    "h\u00e9llo w\u00f6rld \u2713".encode(),
    b"tab\tinside",
    b"last",
]


def test_produce_stdin_then_consume_the_same_lines(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    assert run_cli("topics", "create", "lines", bootstrap=bootstrap).returncode == 0

    produced = run_cli("produce", "lines", bootstrap=bootstrap, stdin=b"\n".join(LINES) + b"\n")
    assert produced.returncode == 0, produced
    assert produced.stdout == b""
    assert len(produced.err_lines) == 1
    assert produced.err_lines[0].startswith(f"produced {len(LINES)} records (")
    assert "records/s" in produced.stderr
    assert "MB/s" in produced.stderr

    consumed = run_cli(
        "consume",
        "lines",
        "--from-beginning",
        "--max-messages",
        str(len(LINES)),
        "--timeout",
        "20",
        bootstrap=bootstrap,
    )
    assert consumed.returncode == 0, consumed
    assert consumed.stdout == b"\n".join(LINES) + b"\n"
    assert consumed.err_lines == [f"consumed {len(LINES)} messages from 'lines'"]

    # keys, read_uncommitted, and stopping at the end of the partition
    keyed = run_cli("produce", "lines", "--key-separator", "=", bootstrap=bootstrap, stdin=b"k1=v1\nk2=v=2\n")
    assert keyed.returncode == 0, keyed
    consumed = run_cli(
        "consume",
        "lines",
        "--from-beginning",
        "--exit-at-end",
        "--print-key",
        "--isolation",
        "read_uncommitted",
        "--timeout",
        "20",
        bootstrap=bootstrap,
    )
    assert consumed.returncode == 0, consumed
    assert consumed.stdout.split(b"\n")[:-1] == [b"null\t" + line for line in LINES] + [b"k1\tv1", b"k2\tv=2"]

    # from the end (the default): only records produced after it started, none of the old ones
    tail = subprocess.Popen(
        [sys.executable, "-m", "exactly", "-b", bootstrap, "consume", "lines", "-n", "1", "-t", "30", "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    producer = Producer({"bootstrap.servers": bootstrap})
    try:
        tick = 0
        while tail.poll() is None and tick < 100:  # until the tailing consumer has seen one
            producer.produce("lines", b"tick %d" % tick)
            producer.flush(10)
            tick += 1
            time.sleep(0.2)
        out, err = tail.communicate(timeout=30)
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.wait()
    assert (tail.returncode, err) == (0, b"")
    assert re.fullmatch(rb"tick \d+\n", out), out


def test_produce_generated_records(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    assert run_cli("topics", "create", "gen", "--partitions", "2", bootstrap=bootstrap).returncode == 0
    produced = run_cli(
        "produce", "gen", "--generate", "2000", "--size", "64", "--compression", "lz4", bootstrap=bootstrap
    )
    assert produced.returncode == 0, produced
    assert re.fullmatch(
        r"produced 2,000 records \(125\.0 KB\) to 'gen' in [\d.,]+ s: [\d,]+ records/s, [\d.]+ MB/s",
        produced.stderr.strip(),
    ), produced.stderr
    consumed = run_cli(
        "consume", "gen", "--from-beginning", "--exit-at-end", "--timeout", "20", "-q", bootstrap=bootstrap
    )
    assert consumed.returncode == 0, consumed
    assert consumed.stderr == ""
    values = consumed.stdout.split(b"\n")[:-1]
    assert len(values) == 2000
    assert all(len(v) == 64 for v in values)
    assert sorted(int(v.split(b" ")[0]) for v in values) == list(range(2000))


@pytest.fixture(scope="module")
def dup_topic(shared_broker: BrokerProcess) -> str:
    """A one-partition topic named 'dup', created directly with the AdminClient."""
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    admin.create_topics([NewTopic("dup", 1)])["dup"].result(timeout=20)
    return "dup"


@pytest.mark.parametrize(
    ("args", "stdin", "fragments"),
    [
        (["topics", "create", "dup"], None, ["error: topic 'dup' already exists"]),
        (["topics", "describe", "missing"], None, ["error: topic 'missing' does not exist"]),
        (["topics", "delete", "missing"], None, ["error: topic 'missing' does not exist"]),
        (["topics", "alter", "dup", "--set", "no.such.config=1"], None, ["cannot alter topic 'dup'"]),
        (["consume", "missing", "--timeout", "1"], None, ["topic 'missing' does not exist"]),
        (["consume", "dup", "--partition", "9", "--timeout", "1"], None, ["has no partition 9"]),
        (["produce", "dup", "-k", ","], b"key,value\nno separator\n", ["line 2 has no key separator ','"]),
        (["produce", "dup", "--partition", "3", "--generate", "1"], None, ["has no partition 3"]),
    ],
)
def test_errors_are_one_line(
    dup_topic: str, shared_broker: BrokerProcess, args: list[str], stdin: bytes | None, fragments: list[str]
) -> None:
    assert_one_line_error(run_cli(*args, bootstrap=shared_broker.bootstrap, stdin=stdin), *fragments)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["topics", "alter", "dup"], ["nothing to alter"]),
        (["topics", "create", "x", "--config", "novalue"], ["invalid config 'novalue': expected KEY=VALUE"]),
        (
            ["topics", "create", "x", "--partitions", "many"],
            ["--partitions", "'exactly topics create --help'"],
        ),
        (["topics", "create"], ["Missing argument"]),
        (["consume", "dup", "--isolation", "sometimes"], ["--isolation"]),
        (["produce", "dup", "--generate", "5", "--key-separator", ","], ["--key-separator"]),
        (["no-such-command"], ["No such command 'no-such-command'"]),
    ],
)
def test_usage_errors_are_one_line_with_exit_code_2(
    capsys: pytest.CaptureFixture[str], args: list[str], fragments: list[str]
) -> None:
    """Rejected before any connection (so run in-process, against no broker)."""
    result = run_in_process(capsys, "-b", "127.0.0.1:1", *args)
    assert result.returncode == 2
    assert_one_line_error(result, *fragments)


@pytest.mark.parametrize(
    "args",
    [
        ["topics", "list"],
        ["topics", "create", "t"],
        ["produce", "t", "--generate", "1"],
        ["consume", "t", "--timeout", "1"],
    ],
)
def test_unreachable_broker_is_a_quick_one_line_error(args: list[str]) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    result = run_cli(*args, "--bootstrap-server", bootstrap, timeout=20)
    assert time.monotonic() - started < 10
    assert_one_line_error(result, f"cannot reach the broker at {bootstrap}", "Connection refused")
