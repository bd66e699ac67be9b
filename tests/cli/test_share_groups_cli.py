"""`exactly groups` for share groups (KIP-932) against a real broker with group.share.enable=true and a
real share consumer (confluent-kafka's `ShareConsumer`): list shows the type, describe the members,
assignments and start offsets, reset-offsets / delete-offsets only while the group has no members."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ShareConsumer

from exactly.testing.processes import BrokerProcess
from tests.cli.test_groups_cli import groups
from tests.interop.groups_support import produce, wait_until
from tests.interop.support import create_topic, running_broker

pytestmark = pytest.mark.interop

TOPIC, GROUP = "share-cli-t", "share-cli-g"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("share-groups-cli") / "data"
    with running_broker(data, "group.share.enable=true", "share.auto.offset.reset=earliest") as proc:
        yield proc


def test_share_group_commands(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    create_topic(b, TOPIC, 2)
    produce(b, TOPIC, [f"v{i}" for i in range(20)], 2)
    consumer: Any = ShareConsumer({"bootstrap.servers": b, "group.id": GROUP, "log_level": 3})
    try:
        consumer.subscribe([TOPIC])
        got: list[Any] = []
        wait_until(
            lambda: bool(got.extend(m for m in consumer.poll(0.5) if m.error() is None)) or len(got) >= 20,
            20,
            "20 records",
        )
        consumer.poll(0.5)  # acknowledges the last batch (implicit mode)

        listed = groups("list", bootstrap=b)
        assert listed.out_lines == ["GROUP        TYPE   STATE", f"{GROUP}  share  Stable"], listed
        described = groups("describe", GROUP, bootstrap=b)
        assert described.returncode == 0, described
        lines = described.out_lines
        assert lines[0].startswith(f"Group: {GROUP}\tProtocol: share\tState: Stable\tAssignor: simple"), lines
        assert f"{TOPIC}-0,{TOPIC}-1" in lines[2]
        assert lines[3].split() == ["TOPIC", "PARTITION", "START-OFFSET", "HIGH-WATERMARK", "NOT-DONE"]
        wait_until(
            lambda: (
                [ln.split() for ln in groups("describe", GROUP, bootstrap=b).out_lines[4:]]
                == [[TOPIC, "0", "10", "10", "0"], [TOPIC, "1", "10", "10", "0"]]
            ),
            10,
            "every record acknowledged",
        )
        busy = groups("reset-offsets", GROUP, "--topic", TOPIC, "--to-earliest", "--execute", bootstrap=b)
        assert busy.returncode != 0, busy
        assert "no active members" in busy.stderr, busy
        refused = groups("delete-offsets", GROUP, "--topic", TOPIC, bootstrap=b)
        assert refused.returncode != 0, refused
        assert "has active members" in refused.stderr, refused
    finally:
        with contextlib.suppress(Exception):
            consumer.close()

    # the member left: the group is Empty and its offsets may change
    wait_until(lambda: "share  Empty" in groups("list", bootstrap=b).out, 10, "an empty share group")
    dry = groups("reset-offsets", GROUP, "--topic", TOPIC, "--shift-by", "-4", bootstrap=b)
    assert dry.out_lines[1:3] == [f"{TOPIC}  0          6", f"{TOPIC}  1          6"], dry
    done = groups(
        "reset-offsets",
        GROUP,
        "--topic",
        TOPIC,
        "--partition",
        "1",
        "--to-earliest",
        "--execute",
        bootstrap=b,
    )
    assert done.returncode == 0, done
    assert f"share group '{GROUP}'" in done.out, done
    rows = [ln.split() for ln in groups("describe", GROUP, bootstrap=b).out_lines if ln.startswith(TOPIC)]
    assert rows == [[TOPIC, "0", "10", "10", "0"], [TOPIC, "1", "0", "10", "10"]]
    deleted = groups("delete-offsets", GROUP, "--topic", TOPIC, "--topic", "nope", bootstrap=b)
    assert f"deleted the offsets of share group '{GROUP}' for topic '{TOPIC}'" in deleted.out, deleted
    assert deleted.returncode != 0, deleted
    assert "nope: UNKNOWN_TOPIC_OR_PARTITION" in deleted.stderr, deleted
    assert "no share partition state yet" in groups("describe", GROUP, bootstrap=b).out
    missing = groups("delete-offsets", "no-such-group", "--topic", TOPIC, bootstrap=b)
    assert missing.returncode != 0, missing
    assert "does not exist" in missing.stderr, missing
