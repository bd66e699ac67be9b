"""`exactly acls add|remove|list` against a real broker with the authorizer on; the ACLs it adds are
enforced on a real producer. The broker listens on SASL_PLAINTEXT only: the CLI authenticates as the super
user `admin` (`--command-config`, as kafka-acls.sh), producers as their own users."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer

from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from exactly.testing.processes import BrokerProcess, free_port
from tests.cli.helpers import Result, assert_one_line_error, run_cli
from tests.interop.client import RawClient
from tests.interop.support import running_broker, scram_settings, store_scram_users

pytestmark = pytest.mark.interop

SETTINGS = (
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users=User:admin",
    "sasl.enabled.mechanisms=SCRAM-SHA-256",
)
PASSWORDS = {user: f"{user}-cli-pw" for user in ("admin", "alice", "bob", "carol", "mallory")}


def as_user(user: str) -> dict[str, str]:
    return scram_settings(user, PASSWORDS[user])


def command_config(user: str = "admin") -> list[str]:
    return [x for key, value in as_user(user).items() for x in ("--command-config", f"{key}={value}")]


def acls(*args: str, bootstrap: str, user: str = "admin") -> Result:
    """`exactly acls ARGS...` as `user`."""
    return run_cli("acls", *args, *command_config(user), bootstrap=bootstrap)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("acls-cli") / "data"
    store_scram_users(data, PASSWORDS)
    port = free_port()
    with running_broker(data, f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}", *SETTINGS, port=port) as proc:
        yield proc


def create_topic(bootstrap: str, name: str) -> None:
    raw = RawClient(bootstrap).login("admin", PASSWORDS["admin"])
    try:
        response = raw.request(
            ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest([CreatableTopic(name, 1, 1)], 10_000, False)
        )
        assert response.topics[0].error_code == 0, response.topics[0]
    finally:
        raw.close()


def produce_as(bootstrap: str, user: str, topic: str) -> KafkaError | None:
    """One message as `user`; the delivery error, or None."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, **as_user(user), "enable.idempotence": False, "retries": 0}
    )
    errors: list[KafkaError | None] = []
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    assert len(errors) == 1
    return errors[0]


def test_add_list_enforce_remove(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "cli-orders")
    b = broker.bootstrap
    added = acls(
        "add", "--allow-principal", "User:alice", "--operation", "Write", "--operation", "describe",
        "--topic", "cli-", "--resource-pattern-type", "prefixed", bootstrap=b,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert added.out_lines == [
        "added ALLOW User:alice from * WRITE on TOPIC:PREFIXED:cli-",
        "added ALLOW User:alice from * DESCRIBE on TOPIC:PREFIXED:cli-",
    ]
    acls(
        "add", "--deny-principal", "User:alice", "--operation", "Write", "--topic", "cli-secret", bootstrap=b
    )
    listed = acls("list", bootstrap=b)
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

    removed = acls("remove", "--topic", "cli-", "--resource-pattern-type", "prefixed", bootstrap=b)
    assert removed.returncode == 0, removed.stderr
    assert len(removed.out_lines) == 2
    assert all(line.startswith("removed ALLOW User:alice") for line in removed.out_lines)
    left = acls("list", "--principal", "User:alice", bootstrap=b)
    assert [line.split()[1] for line in left.out_lines[1:]] == ["cli-secret"]


def test_errors_are_one_line(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    assert_one_line_error(
        acls("add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t", bootstrap=b),
        "unknown operation 'Fly'",
    )
    assert_one_line_error(
        acls("add", "--allow-principal", "alice", "--operation", "Read", "--topic", "t", bootstrap=b),
        "TYPE:NAME",
    )
    assert_one_line_error(acls("add", "--operation", "Read", "--topic", "t", bootstrap=b), "principal")
    # not a super user: the broker refuses, one line naming the error
    denied = acls(
        "add",
        "--allow-principal",
        "User:a",
        "--operation",
        "Read",
        "--topic",
        "t",
        bootstrap=b,
        user="mallory",
    )
    assert_one_line_error(denied, "cannot add", "Cluster authorization failed")


def test_no_acl_means_denied(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "cli-nobody")
    refused = produce_as(broker.bootstrap, "carol", "cli-nobody")
    assert refused is not None
    assert refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
