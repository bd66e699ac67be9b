"""The ZooKeeper codec of a cluster's ACLs and SCRAM credentials: Kafka's literal bytes, and round trips."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.cluster import security_znodes as sz
from exactly.cluster.metadata import ScramCredential
from exactly.cluster.znodes import ZnodeFormatError
from exactly.security.acls import AccessControlEntry, PatternType, PermissionType, ResourcePattern
from exactly.security.operations import AclOperation, ResourceType

_O, _P, _T = AclOperation, PermissionType, ResourceType


def test_kafka_acl_znode_bytes() -> None:
    entries = [
        AccessControlEntry("User:bob", "*", _O.WRITE, _P.DENY),
        AccessControlEntry("User:alice", "10.0.0.1", _O.CLUSTER_ACTION, _P.ALLOW),
    ]
    data = sz.encode_acls(entries)
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {
                "principal": "User:alice",
                "permissionType": "Allow",
                "operation": "ClusterAction",
                "host": "10.0.0.1",
            },
            {"principal": "User:bob", "permissionType": "Deny", "operation": "Write", "host": "*"},
        ],
    }
    assert sz.decode_acls(data) == frozenset(entries)


def test_reads_what_kafka_wrote() -> None:
    kafka = (
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"IdempotentWrite",'
        b'"host":"*"},{"principal":"User:b","permissionType":"Allow","operation":"DescribeConfigs","host":"*"}]}'
    )
    assert sz.decode_acls(kafka) == {
        AccessControlEntry("User:a", "*", _O.IDEMPOTENT_WRITE, _P.ALLOW),
        AccessControlEntry("User:b", "*", _O.DESCRIBE_CONFIGS, _P.ALLOW),
    }
    assert sz.decode_acls(b"") == frozenset()


def test_paths_are_kafkas() -> None:
    assert sz.acl_path(ResourcePattern(_T.TOPIC, "orders")) == "/kafka-acl/Topic/orders"
    assert sz.acl_path(ResourcePattern(_T.TRANSACTIONAL_ID, "tx", PatternType.PREFIXED)) == (
        "/kafka-acl-extended/prefixed/TransactionalId/tx"
    )
    assert sz.acl_path(ResourcePattern(_T.CLUSTER, "kafka-cluster")) == "/kafka-acl/Cluster/kafka-cluster"
    assert sz.acl_changes_path(PatternType.LITERAL) == "/kafka-acl-changes"
    assert sz.acl_changes_path(PatternType.PREFIXED) == "/kafka-acl-extended-changes"
    assert sz.user_config_path("alice") == "/config/users/alice"
    assert sz.change_sequence("acl_changes_0000000012") == 12
    assert sz.change_sequence("config_change_0000000003", sz.CONFIG_CHANGE_PREFIX) == 3
    assert sz.change_sequence("something_else") is None


def test_change_notifications_are_kafkas() -> None:
    assert sz.encode_acl_change(ResourcePattern(_T.GROUP, "g1")) == b"Group:g1"
    prefixed = ResourcePattern(_T.TOPIC, "orders-", PatternType.PREFIXED)
    assert json.loads(sz.encode_acl_change(prefixed)) == {
        "version": 1,
        "resourceType": "TOPIC",
        "name": "orders-",
        "patternType": "PREFIXED",
    }
    assert sz.decode_acl_change(b"Topic:a:b", extended=False) == ResourcePattern(_T.TOPIC, "a:b")
    assert sz.decode_acl_change(
        b'{"version":1,"resourceType":"Topic","name":"x","patternType":"Prefixed"}', extended=True
    ) == ResourcePattern(_T.TOPIC, "x", PatternType.PREFIXED)


@pytest.mark.parametrize(
    ("data", "extended"),
    [(b"nocolon", False), (b"Nonsense:x", False), (b'{"version":2}', True), (b"[1]", True), (b"\xff", False)],
)
def test_bad_notifications_are_refused(data: bytes, extended: bool) -> None:
    with pytest.raises(ZnodeFormatError):
        sz.decode_acl_change(data, extended)


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b'{"version":2,"acls":[]}',
        b'{"version":1,"acls":{}}',
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Fly","host":"*"}]}',
        b'{"version":1,"acls":[{"principal":1,"permissionType":"Allow","operation":"Read","host":"*"}]}',
    ],
)
def test_bad_acl_znodes_are_refused(data: bytes) -> None:
    with pytest.raises(ZnodeFormatError):
        sz.decode_acls(data)


_names = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
_entries = st.builds(
    AccessControlEntry,
    _names.map(lambda n: f"User:{n}"),
    st.sampled_from(["*", "127.0.0.1", "::1"]),
    st.sampled_from([op for op in AclOperation if op not in (_O.UNKNOWN, _O.ANY)]),
    st.sampled_from([_P.ALLOW, _P.DENY]),
)


@given(st.frozensets(_entries, max_size=8))
def test_acl_znode_round_trip(entries: frozenset[AccessControlEntry]) -> None:
    data = sz.encode_acls(entries)
    assert sz.decode_acls(data) == entries
    assert sz.encode_acls(sz.decode_acls(data)) == data  # one set, one spelling


@given(
    st.sampled_from(sz.RESOURCE_TYPES), _names, st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED])
)
def test_acl_change_round_trip(resource_type: ResourceType, name: str, pattern_type: PatternType) -> None:
    pattern = ResourcePattern(resource_type, name, pattern_type)
    data = sz.encode_acl_change(pattern)
    assert sz.decode_acl_change(data, extended=pattern_type is PatternType.PREFIXED) == pattern


def test_scram_credential_is_kafkas_string() -> None:
    credential = ScramCredential(b"salt", 4096, b"stored", b"server")
    text = sz.encode_scram(credential)
    assert text == "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096"
    assert sz.decode_scram(text) == credential
    config = sz.with_scram({"consumer_byte_rate": "1024"}, "SCRAM-SHA-256", credential)
    assert config == {"consumer_byte_rate": "1024", "SCRAM-SHA-256": text}  # quotas kept
    assert sz.scram_credentials(config) == {"SCRAM-SHA-256": credential}
    assert sz.with_scram(config, "SCRAM-SHA-256", None) == {"consumer_byte_rate": "1024"}


@pytest.mark.parametrize(
    "text", ["salt=AA==", "salt=!!,stored_key=AA==,server_key=AA==,iterations=1", "junk"]
)
def test_bad_scram_strings_are_refused(text: str) -> None:
    with pytest.raises(ZnodeFormatError):
        sz.decode_scram(text)


@given(
    st.binary(min_size=1, max_size=64),
    st.integers(4096, 16384),
    st.binary(max_size=64),
    st.binary(max_size=64),
)
def test_scram_round_trip(salt: bytes, iterations: int, stored: bytes, server: bytes) -> None:
    credential = ScramCredential(salt, iterations, stored, server)
    assert sz.decode_scram(sz.encode_scram(credential)) == credential


def test_sanitize_is_kafkas() -> None:
    assert sz.sanitize("alice") == "alice"
    assert sz.sanitize("a b*c~é/") == "a%20b%2Ac%7E%C3%A9%2F"
    assert sz.user_of_entity_path("users/a%40b") == "a@b"
    assert sz.user_of_entity_path("users/alice/clients/c") is None
    assert sz.user_of_entity_path("users/<default>") is None
    assert sz.user_of_entity_path("topics/t") is None


@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30))
def test_sanitize_round_trip(name: str) -> None:
    sanitized = sz.sanitize(name)
    assert "/" not in sanitized
    assert "*" not in sanitized
    assert sz.desanitize(sanitized) == name
    assert sz.user_of_entity_path(sz.user_entity_path(name)) == name
