from __future__ import annotations

from pathlib import Path

import pytest

from exactly.cluster.metadata import FILE_NAME, ClusterMetadata, CorruptMetadataError
from exactly.errors import ErrorCode, KafkaError


def test_topics_survive_reopen(tmp_path: Path) -> None:
    md = ClusterMetadata(tmp_path)
    a = md.create_topic("a", 3, {"retention.ms": "1000"})
    md.create_topic("b", 1)
    md.add_partitions("a", 5)
    md.set_configs("b", {"cleanup.policy": "compact"})
    md.create_topic("c", 2)
    md.delete_topic("c")
    md.close()

    again = ClusterMetadata(tmp_path)
    assert sorted(again.topics) == ["a", "b"]
    assert again.topics["a"].topic_id == a.topic_id
    assert again.topics["a"].partitions == 5
    assert again.topics["a"].configs == {"retention.ms": "1000"}
    assert again.topics["b"].configs == {"cleanup.policy": "compact"}
    assert again.by_id(a.topic_id) == again.topics["a"]


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("..", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("has space", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("x" * 250, ErrorCode.INVALID_TOPIC_EXCEPTION),
    ],
)
def test_invalid_names(tmp_path: Path, name: str, code: ErrorCode) -> None:
    md = ClusterMetadata(tmp_path)
    with pytest.raises(KafkaError) as info:
        md.create_topic(name, 1)
    assert info.value.code == code
    assert md.topics == {}


def test_errors(tmp_path: Path) -> None:
    md = ClusterMetadata(tmp_path)
    md.create_topic("t", 2)
    for call, code in [
        (lambda: md.create_topic("t", 1), ErrorCode.TOPIC_ALREADY_EXISTS),
        (lambda: md.create_topic("u", 0), ErrorCode.INVALID_PARTITIONS),
        (lambda: md.add_partitions("t", 2), ErrorCode.INVALID_PARTITIONS),
        (lambda: md.delete_topic("nope"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]:
        with pytest.raises(KafkaError) as info:
            call()
        assert info.value.code == code


def test_torn_last_line_is_cut_and_earlier_records_kept(tmp_path: Path) -> None:
    md = ClusterMetadata(tmp_path)
    md.create_topic("keep", 1)
    md.create_topic("torn", 1)
    md.close()
    path = tmp_path / FILE_NAME
    raw = path.read_bytes()
    path.write_bytes(raw[:-7])  # crash in the middle of the second append
    again = ClusterMetadata(tmp_path)
    assert list(again.topics) == ["keep"]
    assert path.read_bytes() == raw[: raw.index(b"\n") + 1]
    again.create_topic("next", 1)
    again.close()
    assert sorted(ClusterMetadata(tmp_path).topics) == ["keep", "next"]


def test_corruption_in_the_middle_is_refused(tmp_path: Path) -> None:
    md = ClusterMetadata(tmp_path)
    md.create_topic("a", 1)
    md.create_topic("b", 1)
    md.close()
    path = tmp_path / FILE_NAME
    raw = bytearray(path.read_bytes())
    raw[12] ^= 0x01
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptMetadataError, match="line 1"):
        ClusterMetadata(tmp_path)


def test_producer_ids_are_never_reused_after_restart(tmp_path: Path) -> None:
    from exactly.cluster.producer_ids import ProducerIdManager

    md = ClusterMetadata(tmp_path)
    ids = ProducerIdManager(md, block_size=10)
    first = [ids.next_id() for _ in range(15)]
    assert first == list(range(15))
    md.close()
    # A crash loses the in-memory position inside the block; the next start begins after the last block.
    md2 = ClusterMetadata(tmp_path)
    again = ProducerIdManager(md2, block_size=10)
    assert again.next_id() == 20


def test_run_time_broker_configs_survive_reopen(tmp_path: Path) -> None:
    md = ClusterMetadata(tmp_path)
    md.set_broker_configs("", {"log.retention.ms": "1000"})
    md.set_broker_configs("0", {"num.io.threads": "4", "log.retention.minutes": "2"})
    md.set_broker_configs("0", {"num.io.threads": "5"})  # the complete new set replaces the old one
    md.close()
    again = ClusterMetadata(tmp_path)
    assert again.broker_configs == {"": {"log.retention.ms": "1000"}, "0": {"num.io.threads": "5"}}
    again.set_broker_configs("", {})
    again.close()
    assert ClusterMetadata(tmp_path).broker_configs == {"0": {"num.io.threads": "5"}}


def test_client_quotas_survive_reopen_and_only_changes_are_appended(tmp_path: Path) -> None:
    alice_app = (("client-id", "app"), ("user", "alice"))
    default_client = (("client-id", None),)
    md = ClusterMetadata(tmp_path)
    md.alter_client_quotas(alice_app, {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0})
    md.alter_client_quotas(default_client, {"producer_byte_rate": 512.0})
    size = (tmp_path / FILE_NAME).stat().st_size
    md.alter_client_quotas(alice_app, {"producer_byte_rate": 1024.0, "request_percentage": None})
    assert (tmp_path / FILE_NAME).stat().st_size == size  # no change, nothing appended
    md.alter_client_quotas(alice_app, {"consumer_byte_rate": None, "request_percentage": 12.5})
    md.alter_client_quotas(default_client, {"producer_byte_rate": None})
    md.close()

    again = ClusterMetadata(tmp_path)
    assert again.client_quotas == {alice_app: {"producer_byte_rate": 1024.0, "request_percentage": 12.5}}


def test_acls_survive_reopen_and_a_torn_acl_record_is_cut(tmp_path: Path) -> None:
    from exactly.security.acls import (
        AccessControlEntry,
        AclBinding,
        PatternType,
        PermissionType,
        ResourcePattern,
    )
    from exactly.security.operations import AclOperation, ResourceType

    def acl(name: str, pattern: PatternType = PatternType.LITERAL) -> AclBinding:
        return AclBinding(
            ResourcePattern(ResourceType.TOPIC, name, pattern),
            AccessControlEntry("User:a", "*", AclOperation.READ, PermissionType.ALLOW),
        )

    md = ClusterMetadata(tmp_path)
    assert md.create_acls([acl("a"), acl("b-", PatternType.PREFIXED), acl("a")]) == [
        acl("a"),
        acl("b-", PatternType.PREFIXED),
    ]
    assert md.create_acls([acl("a")]) == []  # already there: nothing appended
    size = (tmp_path / FILE_NAME).stat().st_size
    assert md.delete_acls([acl("a"), acl("zzz")]) == [acl("a")]
    md.close()
    reopened = ClusterMetadata(tmp_path)
    assert reopened.acls == {acl("b-", PatternType.PREFIXED)}
    reopened.close()
    # a crash in the middle of the delete record: the delete never happened
    with open(tmp_path / FILE_NAME, "r+b") as f:
        f.truncate(size + 10)
    again = ClusterMetadata(tmp_path)
    assert again.acls == {acl("a"), acl("b-", PatternType.PREFIXED)}
    again.close()
