"""`exactly acls add|remove|list` against a real broker with the authorizer on; the ACLs it adds are
enforced on a real producer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer

from exactly.verify.processes import BrokerProcess
from tests.cli.helpers import assert_one_line_error, run_cli
from tests.interop.support import create_topic, running_broker

pytestmark = pytest.mark.interop

SETTINGS = (
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users=User:exactly-cli;User:raw-test",  # the CLI's and create_topic's client ids
    "exactly.debug.principal.by.client.id=true",
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("acls-cli") / "data"
    with running_broker(data, *SETTINGS) as proc:
        yield proc


def produce_as(bootstrap: str, client_id: str, topic: str) -> KafkaError | None:
    """One message as `client_id`; the delivery error, or None."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "client.id": client_id, "enable.idempotence": False, "retries": 0}
    )
    errors: list[KafkaError | None] = []
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    assert len(errors) == 1
    return errors[0]


def test_add_list_enforce_remove(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "cli-orders")
    b = broker.bootstrap
    added = run_cli(
        "acls", "add", "--allow-principal", "User:alice", "--operation", "Write", "--operation", "describe",
        "--topic", "cli-", "--resource-pattern-type", "prefixed", bootstrap=b,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert added.out_lines == [
        "added ALLOW User:alice from * WRITE on TOPIC:PREFIXED:cli-",
        "added ALLOW User:alice from * DESCRIBE on TOPIC:PREFIXED:cli-",
    ]
    run_cli("acls", "add", "--deny-principal", "User:alice", "--operation", "Write", "--topic", "cli-secret",
            bootstrap=b)  # fmt: skip
    listed = run_cli("acls", "list", bootstrap=b)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.out_lines[1:]]
    assert sorted(rows) == sorted(
        [
            ["TOPIC", "cli-", "PREFIXED", "User:alice", "*", "DESCRIBE", "ALLOW"],
            ["TOPIC", "cli-", "PREFIXED", "User:alice", "*", "WRITE", "ALLOW"],
            ["TOPIC", "cli-secret", "LITERAL", "User:alice", "*", "WRITE", "DENY"],
        ]
    )
    assert produce_as(b, "alice", "cli-orders") is None
    refused = produce_as(b, "bob", "cli-orders")
    assert refused is not None
    assert refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    removed = run_cli("acls", "remove", "--topic", "cli-", "--resource-pattern-type", "prefixed", bootstrap=b)
    assert removed.returncode == 0, removed.stderr
    assert len(removed.out_lines) == 2
    assert all(line.startswith("removed ALLOW User:alice") for line in removed.out_lines)
    left = run_cli("acls", "list", "--principal", "User:alice", bootstrap=b)
    assert [line.split()[1] for line in left.out_lines[1:]] == ["cli-secret"]


def test_errors_are_one_line(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    assert_one_line_error(
        run_cli(
            "acls", "add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t", bootstrap=b
        ),
        "unknown operation 'Fly'",
    )
    assert_one_line_error(
        run_cli(
            "acls", "add", "--allow-principal", "alice", "--operation", "Read", "--topic", "t", bootstrap=b
        ),
        "TYPE:NAME",
    )
    assert_one_line_error(
        run_cli("acls", "add", "--operation", "Read", "--topic", "t", bootstrap=b), "principal"
    )
    # not a super user: the broker refuses, one line naming the error
    denied = run_cli(
        "acls", "add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t",
        "--command-config", "client.id=mallory", bootstrap=b,
    )  # fmt: skip
    assert_one_line_error(denied, "cannot add", "Cluster authorization failed")


def test_no_acl_means_denied(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "cli-nobody")
    refused = produce_as(broker.bootstrap, "carol", "cli-nobody")
    assert refused is not None
    assert refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
