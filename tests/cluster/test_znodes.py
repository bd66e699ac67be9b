"""Kafka's znode layout and JSON codecs: literal Kafka JSON decodes to the expected values, every
codec round-trips (Hypothesis), and every decoder either decodes arbitrary input or raises
ZnodeFormatError, never anything else."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.cluster import znodes as z
from exactly.cluster.znodes import (
    BrokerRegistration,
    ConfigChangeNotification,
    ControllerRegistration,
    EntityConfig,
    PartitionState,
    ProducerIdBlock,
    RegisteredEndpoint,
    TopicAssignment,
    ZnodeFormatError,
)
from exactly.errors import ExactlyError

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
BROKER_ID = st.integers(0, 2**31 - 1)
TOPIC = st.text("abcXYZ019._-", min_size=1, max_size=20)
PROTOCOL = st.sampled_from(z.SECURITY_PROTOCOLS)


# ----------------------------------------------------------------------------------------- paths


def test_paths_are_kafkas() -> None:
    assert z.broker_path(3) == "/brokers/ids/3"
    assert z.topic_path("t") == "/brokers/topics/t"
    assert z.partitions_path("t") == "/brokers/topics/t/partitions"
    assert z.partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert z.delete_topic_path("t") == "/admin/delete_topics/t"
    assert z.config_path("topics", "t") == "/config/topics/t"
    assert z.config_path("users", "alice") == "/config/users/alice"
    assert z.controlled_shutdown_path(4) == "/exactly/controlled_shutdown/4"
    assert (z.CONTROLLER, z.CONTROLLER_EPOCH, z.PRODUCER_ID_BLOCK) == (
        "/controller",
        "/controller_epoch",
        "/latest_producer_id_block",
    )
    assert (z.REASSIGN, z.PREFERRED_ELECTION) == (
        "/admin/reassign_partitions",
        "/admin/preferred_replica_election",
    )


def test_config_path_refuses_unknown_types() -> None:
    with pytest.raises(ValueError, match="client-metrics"):
        z.config_path("client-metrics", "x")


def test_persistent_paths_are_kafkas_list_then_exactlys() -> None:
    assert z.PERSISTENT_PATHS == (
        "/consumers",
        "/brokers/ids",
        "/brokers/topics",
        "/config/changes",
        "/admin/delete_topics",
        "/brokers/seqid",
        "/isr_change_notification",
        "/latest_producer_id_block",
        "/log_dir_event_notification",
        "/config/topics",
        "/config/clients",
        "/config/users",
        "/config/brokers",
        "/config/ips",
        "/exactly/controlled_shutdown",
    )


# ---------------------------------------------------------------------------- literal Kafka JSON


def test_decodes_kafka_broker_registration_v5() -> None:
    data = (
        b'{"features":{},"listener_security_protocol_map":{"CLIENT":"SASL_SSL","REPLICATION":"PLAINTEXT"},'
        b'"endpoints":["CLIENT://host1:9092","REPLICATION://[fe80::1]:9093"],"jmx_port":9999,'
        b'"port":9093,"host":"fe80::1","version":5,"timestamp":"2233345666","rack":"dc1"}'
    )
    reg = BrokerRegistration.decode(7, data)
    assert reg == BrokerRegistration(
        7,
        (
            RegisteredEndpoint("CLIENT", "host1", 9092, "SASL_SSL"),
            RegisteredEndpoint("REPLICATION", "fe80::1", 9093, "PLAINTEXT"),
        ),
        "dc1",
        2233345666,
    )
    assert reg.endpoint("REPLICATION") == RegisteredEndpoint("REPLICATION", "fe80::1", 9093, "PLAINTEXT")
    assert reg.endpoint("NOPE") is None


def test_decodes_kafka_broker_registration_v1_and_v2() -> None:
    v1 = b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666"}'
    assert BrokerRegistration.decode(1, v1).endpoints == (
        RegisteredEndpoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT"),
    )
    v2 = (
        b'{"version":2,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
        b'"endpoints":["PLAINTEXT://host1:9092", "SSL://host1:9093"]}'
    )
    assert BrokerRegistration.decode(1, v2).endpoints == (
        RegisteredEndpoint("PLAINTEXT", "host1", 9092, "PLAINTEXT"),
        RegisteredEndpoint("SSL", "host1", 9093, "SSL"),
    )


def test_encodes_broker_registration_as_kafka_v5() -> None:
    reg = BrokerRegistration(
        1,
        (
            RegisteredEndpoint("INTERNAL", "a", 9093, "SSL"),
            RegisteredEndpoint("EXTERNAL", "b", 9092, "PLAINTEXT"),
        ),
        None,
        1700000000000,
    )
    assert json.loads(reg.encode()) == {
        "version": 5,
        "host": "b",
        "port": 9092,
        "jmx_port": -1,
        "timestamp": "1700000000000",
        "endpoints": ["INTERNAL://a:9093", "EXTERNAL://b:9092"],
        "listener_security_protocol_map": {"INTERNAL": "SSL", "EXTERNAL": "PLAINTEXT"},
        "features": {},
    }
    ssl_only = BrokerRegistration(1, (RegisteredEndpoint("S", "a", 1, "SSL"),), "r1", 5)
    value = json.loads(ssl_only.encode())
    assert (value["host"], value["port"], value["rack"]) == (None, -1, "r1")


def test_partition_state_literal() -> None:
    data = b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2,3]}'
    state = PartitionState.decode(data)
    assert state == PartitionState(leader=1, leader_epoch=7, isr=(1, 2, 3), controller_epoch=3)
    assert state.encode() == data
    recovering = PartitionState(z.NO_LEADER, 8, (2,), 4, z.RECOVERING)
    assert recovering.encode() == (
        b'{"controller_epoch":4,"leader":-1,"version":1,"leader_epoch":8,"isr":[2],"leader_recovery_state":1}'
    )
    assert PartitionState.decode(recovering.encode()) == recovering


def test_topic_assignment_literal_and_kafka_uuid() -> None:
    # Kafka's Uuid(34L, 98L): msb 0x22 and lsb 0x62 in 16 big-endian bytes, base64url, no padding
    topic_id = uuid.UUID(int=(34 << 64) | 98)
    assert z.uuid_to_kafka(topic_id) == "AAAAAAAAACIAAAAAAAAAYg"
    assert z.uuid_from_kafka("AAAAAAAAACIAAAAAAAAAYg") == topic_id
    assert z.uuid_from_kafka("AAAAAAAAACIAAAAAAAAAYg==") == topic_id
    data = (
        b'{"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1]},"adding_replicas":{"0":[4]},'
        b'"removing_replicas":{"0":[1]},"topic_id":"AAAAAAAAACIAAAAAAAAAYg"}'
    )
    assignment = TopicAssignment.decode(data)
    assert assignment == TopicAssignment(topic_id, {0: (1, 2, 3), 1: (2, 3, 1)}, {0: (4,)}, {0: (1,)})
    assert assignment.encode() == data
    assert assignment.replicas(1) == (2, 3, 1)


def test_topic_assignment_without_reassignment_maps_and_stray_entries() -> None:
    data = (
        b'{"version":1,"partitions":{"1":[2],"0":[1]},"topic_id":"AAAAAAAAACIAAAAAAAAAYg",'
        b'"adding_replicas":{"9":[4]}}'
    )
    assignment = TopicAssignment.decode(data)
    assert list(assignment.partitions) == [0, 1]
    assert dict(assignment.adding) == {}
    assert dict(assignment.removing) == {}


def test_topic_assignment_drops_empty_lists_and_is_read_only() -> None:
    assignment = TopicAssignment(uuid.UUID(int=1), {0: (1, 2)}, adding={0: ()})
    assert dict(assignment.adding) == {}
    assert assignment.partitions[0] == (1, 2)
    with pytest.raises(TypeError):
        assignment.partitions[1] = (3,)  # type: ignore[index]


@pytest.mark.parametrize("bad", ["", "AAAA", "AAAAAAAAACIAAAAAAAAAY+", "AAAAAAAAACIAAAAAAAAAYgAA", "x" * 40])
def test_bad_topic_ids(bad: str) -> None:
    with pytest.raises(ZnodeFormatError):
        z.uuid_from_kafka(bad)


def test_controller_literals() -> None:
    data = b'{"version":2,"brokerid":1,"timestamp":"1700000000000","kraftControllerEpoch":-1}'
    assert ControllerRegistration.decode(data) == ControllerRegistration(1, 1700000000000)
    assert ControllerRegistration(1, 1700000000000).encode() == data
    assert ControllerRegistration.decode(b'{"version":1,"brokerid":3,"timestamp":"5"}').broker_id == 3
    assert z.encode_controller_epoch(12) == b"12"
    assert z.decode_controller_epoch(b"12") == 12
    assert z.decode_controller_epoch(b"0") == 0


@pytest.mark.parametrize("bad", [b"", b" 1", b"1.0", b"0x10", b"2147483648", b"1_000", b"\xff"])
def test_bad_controller_epochs(bad: bytes) -> None:
    with pytest.raises(ZnodeFormatError, match="controller epoch"):
        z.decode_controller_epoch(bad)


def test_producer_id_block_literal() -> None:
    data = b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}'
    assert ProducerIdBlock.decode(data) == ProducerIdBlock(2, 1000, 1999)
    assert ProducerIdBlock(2, 1000, 1999).encode() == data


def test_next_block() -> None:
    first = z.next_block(None, 5)
    assert first == ProducerIdBlock(5, 0, 999)
    assert z.next_block(first, 6) == ProducerIdBlock(6, 1000, 1999)
    last = ProducerIdBlock(1, 2**63 - 2000, 2**63 - 1 - z.BLOCK_SIZE)
    assert z.next_block(last, 1) == ProducerIdBlock(1, 2**63 - z.BLOCK_SIZE, 2**63 - 1)
    with pytest.raises(ExactlyError, match="exhausted"):
        z.next_block(ProducerIdBlock(1, 2**63 - z.BLOCK_SIZE, 2**63 - z.BLOCK_SIZE), 1)


def test_config_literals() -> None:
    data = b'{"version":1,"config":{"retention.ms":"1000","cleanup.policy":"compact"}}'
    assert EntityConfig.decode(data) == EntityConfig({"retention.ms": "1000", "cleanup.policy": "compact"})
    assert EntityConfig.decode(data).encode() == data
    change = b'{"version":2,"entity_path":"topics/t"}'
    assert ConfigChangeNotification.decode(change) == ConfigChangeNotification("topics/t")
    assert ConfigChangeNotification("topics/t").encode() == change
    with pytest.raises(ZnodeFormatError, match="version 2"):
        ConfigChangeNotification.decode(b'{"version":1,"entity_type":"topics","entity_name":"t"}')
    with pytest.raises(ZnodeFormatError, match="'config'"):
        EntityConfig.decode(b'{"version":1,"config":{"retention.ms":1000}}')


def test_admin_literals() -> None:
    data = (
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]},'
        b'{"topic":"t","partition":1,"replicas":[3]}]}'
    )
    assert z.decode_reassignment(data) == {("t", 0): (1, 2), ("t", 1): (3,)}
    assert z.encode_reassignment({("t", 1): [3], ("t", 0): [1, 2]}) == data
    dup = (
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
        b'{"topic":"t","partition":0,"replicas":[2]}]}'
    )
    assert z.decode_reassignment(dup) == {("t", 0): (2,)}
    preferred = b'{"version":1,"partitions":[{"topic":"a","partition":2},{"topic":"b","partition":0}]}'
    assert z.decode_preferred_election(preferred) == {("a", 2), ("b", 0)}
    assert z.encode_preferred_election([("b", 0), ("a", 2), ("a", 2)]) == preferred
    with pytest.raises(ZnodeFormatError, match="replicas"):
        z.decode_reassignment(preferred)


# ----------------------------------------------------------------------- field errors, one line


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"leader":1,"leader_epoch":1,"isr":[1]}', "missing field 'controller_epoch'"),
        (b'{"leader":"1","leader_epoch":1,"isr":[1],"controller_epoch":1}', "field 'leader' should be"),
        (b'{"leader":true,"leader_epoch":1,"isr":[1],"controller_epoch":1}', "field 'leader' should be"),
        (b'{"leader":1.0,"leader_epoch":1,"isr":[1],"controller_epoch":1}', "field 'leader' should be"),
        (
            b'{"leader":2147483648,"leader_epoch":1,"isr":[1],"controller_epoch":1}',
            "field 'leader' should be",
        ),
        (b'{"leader":1,"leader_epoch":1,"isr":[1,null],"controller_epoch":1}', "field 'isr' should be"),
        (
            b'{"leader":1,"leader_epoch":1,"isr":[1],"controller_epoch":1,"leader_recovery_state":2}',
            "leader_recovery_state",
        ),
        (b"[1,2]", "expected a JSON object"),
        (b"{", "not UTF-8 JSON"),
        (b'{"leader":NaN}', "not UTF-8 JSON"),
        (b"\xfe\xff\x00{", "not UTF-8 JSON"),
    ],
)
def test_partition_state_errors(data: bytes, message: str) -> None:
    with pytest.raises(ZnodeFormatError, match=message) as info:
        PartitionState.decode(data)
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("partition state: ")


@pytest.mark.parametrize(
    "data",
    [
        b'{"version":0,"timestamp":"1"}',
        b'{"version":5,"timestamp":"1","endpoints":["PLAINTEXT:/h:1"]}',
        b'{"version":5,"timestamp":"1","endpoints":["X://h:1"],"listener_security_protocol_map":{}}',
        b'{"version":5,"timestamp":"1","endpoints":["X://h:1"],"listener_security_protocol_map":{"X":"TLS"}}',
        b'{"version":5,"timestamp":"1","endpoints":["PLAINTEXT://h:99999999999"]}',
        b'{"version":5,"timestamp":"1x","endpoints":[]}',
        b'{"version":5,"timestamp":"1","endpoints":"PLAINTEXT://h:1"}',
        b'{"version":5,"timestamp":"1","endpoints":[],"rack":3}',
    ],
)
def test_broker_registration_errors(data: bytes) -> None:
    with pytest.raises(ZnodeFormatError, match=r"^broker 4 registration: "):
        BrokerRegistration.decode(4, data)


@pytest.mark.parametrize(
    "data",
    [
        b'{"version":3,"partitions":{"0":[1]}}',
        b'{"version":3,"partitions":{"-1":[1]},"topic_id":"AAAAAAAAACIAAAAAAAAAYg"}',
        b'{"version":3,"partitions":{"a":[1]},"topic_id":"AAAAAAAAACIAAAAAAAAAYg"}',
        b'{"version":3,"partitions":{"0":1},"topic_id":"AAAAAAAAACIAAAAAAAAAYg"}',
        b'{"version":3,"partitions":[],"topic_id":"AAAAAAAAACIAAAAAAAAAYg"}',
        b'{"version":3,"partitions":{},"adding_replicas":[],"topic_id":"AAAAAAAAACIAAAAAAAAAYg"}',
    ],
)
def test_topic_assignment_errors(data: bytes) -> None:
    with pytest.raises(ZnodeFormatError, match=r"^topic"):
        TopicAssignment.decode(data)


@pytest.mark.parametrize(
    "data",
    [
        b'{"version":1,"broker":2,"block_start":1000,"block_end":"1999"}',
        b'{"version":1,"broker":2,"block_start":"1000","block_end":"999"}',
        b'{"version":1,"broker":2,"block_start":"-1","block_end":"999"}',
        b'{"version":1,"broker":2,"block_start":"0","block_end":"9223372036854775808"}',
    ],
)
def test_producer_id_block_errors(data: bytes) -> None:
    with pytest.raises(ZnodeFormatError, match=r"^producer id block: "):
        ProducerIdBlock.decode(data)


# ------------------------------------------------------------------------------ round trips

HOST = st.one_of(
    st.text("abcdefghijklmnopqrstuvwxyz0123456789.-_%", max_size=30),
    st.lists(st.text("0123456789abcdef", max_size=4), min_size=3, max_size=8).map(":".join),
)
ENDPOINT = st.builds(
    RegisteredEndpoint, st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789", min_size=1, max_size=20), HOST,
    st.integers(0, 65535), PROTOCOL,
)  # fmt: skip
BROKER_REGISTRATION = st.builds(
    BrokerRegistration,
    BROKER_ID,
    st.lists(ENDPOINT, max_size=4, unique_by=lambda e: e.listener).map(tuple),
    st.none() | st.text(max_size=20),
    st.integers(0, 2**63 - 1),
)
REPLICAS = st.lists(BROKER_ID, min_size=1, max_size=5).map(tuple)


@st.composite
def topic_assignments(draw: st.DrawFn) -> TopicAssignment:
    partitions = draw(st.dictionaries(st.integers(0, 2**31 - 1), REPLICAS, max_size=6))
    keys = st.sampled_from(sorted(partitions)) if partitions else st.nothing()
    size = 3 if partitions else 0
    adding = draw(st.dictionaries(keys, REPLICAS, max_size=size))
    removing = draw(st.dictionaries(keys, REPLICAS, max_size=size))
    return TopicAssignment(uuid.UUID(int=draw(st.integers(0, 2**128 - 1))), partitions, adding, removing)


@given(BROKER_REGISTRATION)
def test_broker_registration_round_trips(reg: BrokerRegistration) -> None:
    assert BrokerRegistration.decode(reg.broker_id, reg.encode()) == reg


@given(
    st.builds(
        PartitionState, INT32, INT32, st.lists(INT32, max_size=6).map(tuple), INT32, st.sampled_from([0, 1])
    )
)
def test_partition_state_round_trips(state: PartitionState) -> None:
    assert PartitionState.decode(state.encode()) == state


@given(topic_assignments())
def test_topic_assignment_round_trips(assignment: TopicAssignment) -> None:
    assert TopicAssignment.decode(assignment.encode()) == assignment


@given(st.builds(ControllerRegistration, INT32, INT64))
def test_controller_registration_round_trips(reg: ControllerRegistration) -> None:
    assert ControllerRegistration.decode(reg.encode()) == reg


@given(INT32)
def test_controller_epoch_round_trips(epoch: int) -> None:
    assert z.decode_controller_epoch(z.encode_controller_epoch(epoch)) == epoch


@st.composite
def producer_id_blocks(draw: st.DrawFn) -> ProducerIdBlock:
    start = draw(st.integers(0, 2**63 - 1))
    return ProducerIdBlock(draw(INT32), start, draw(st.integers(start, 2**63 - 1)))


@given(producer_id_blocks())
def test_producer_id_block_round_trips(block: ProducerIdBlock) -> None:
    assert ProducerIdBlock.decode(block.encode()) == block


@given(st.integers(0, 2**63 - 1 - z.BLOCK_SIZE), BROKER_ID)
def test_next_block_follows_on(end: int, broker: int) -> None:
    block = z.next_block(ProducerIdBlock(0, 0, end), broker)
    assert (block.broker_id, block.start, block.end - block.start + 1) == (broker, end + 1, z.BLOCK_SIZE)


@given(st.dictionaries(st.text(max_size=20), st.text(max_size=20), max_size=8))
def test_entity_config_round_trips(configs: dict[str, str]) -> None:
    assert EntityConfig.decode(EntityConfig(configs).encode()) == EntityConfig(configs)


@given(st.text(max_size=40))
def test_config_change_round_trips(path: str) -> None:
    assert ConfigChangeNotification.decode(ConfigChangeNotification(path).encode()).entity_path == path


@given(st.dictionaries(st.tuples(TOPIC, st.integers(0, 2**31 - 1)), REPLICAS, max_size=6))
def test_reassignment_round_trips(reassignment: dict[tuple[str, int], tuple[int, ...]]) -> None:
    assert z.decode_reassignment(z.encode_reassignment(reassignment)) == reassignment


@given(st.frozensets(st.tuples(TOPIC, st.integers(0, 2**31 - 1)), max_size=6))
def test_preferred_election_round_trips(partitions: frozenset[tuple[str, int]]) -> None:
    assert z.decode_preferred_election(z.encode_preferred_election(partitions)) == partitions


@given(st.integers(0, 2**128 - 1))
def test_kafka_uuid_round_trips(value: int) -> None:
    text = z.uuid_to_kafka(uuid.UUID(int=value))
    assert len(text) == 22
    assert z.uuid_from_kafka(text) == uuid.UUID(int=value)


# ---------------------------------------------------------------- decodes or raises ZnodeFormatError

DECODERS: dict[str, Callable[[bytes], object]] = {
    "broker": lambda data: BrokerRegistration.decode(1, data),
    "partition state": PartitionState.decode,
    "topic": TopicAssignment.decode,
    "controller": ControllerRegistration.decode,
    "controller epoch": z.decode_controller_epoch,
    "producer id block": ProducerIdBlock.decode,
    "entity config": EntityConfig.decode,
    "config change": ConfigChangeNotification.decode,
    "reassignment": z.decode_reassignment,
    "preferred election": z.decode_preferred_election,
}

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
FIELD_NAMES = [
    "version", "host", "port", "jmx_port", "timestamp", "endpoints", "listener_security_protocol_map",
    "rack", "features", "brokerid", "controller_epoch", "leader", "leader_epoch", "isr",
    "leader_recovery_state", "partitions", "adding_replicas", "removing_replicas", "topic_id", "broker",
    "block_start", "block_end", "config", "entity_path", "topic", "partition", "replicas",
]  # fmt: skip
# objects with the real field names and values of any JSON type, as a near miss is likelier to reach
# deep into a decoder than random bytes
NEAR_MISSES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text("0123456789-:/[]PLAINTEXT", max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(FIELD_NAMES), inner, max_size=8)
    ),
    max_leaves=25,
)


def _decodes_or_raises(decode: Callable[[bytes], object], data: bytes) -> None:
    error = ""
    try:
        decode(data)
    except ZnodeFormatError as exc:
        error = str(exc)
    assert "\n" not in error


@pytest.mark.parametrize("name", DECODERS)
@given(data=st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise(name: str, data: bytes) -> None:
    _decodes_or_raises(DECODERS[name], data)


@pytest.mark.parametrize("name", DECODERS)
@given(value=JSON_VALUES | NEAR_MISSES)
def test_arbitrary_json_decodes_or_raises(name: str, value: Any) -> None:
    _decodes_or_raises(DECODERS[name], json.dumps(value).encode())


@pytest.mark.parametrize("name", DECODERS)
def test_deep_nesting_raises(name: str) -> None:
    with pytest.raises(ZnodeFormatError):
        DECODERS[name](b"[" * 100_000 + b"]" * 100_000)


@given(BROKER_REGISTRATION, st.data())
def test_broker_registration_without_a_field_raises(reg: BrokerRegistration, data: st.DataObject) -> None:
    value = json.loads(reg.encode())
    required = ["version", "timestamp", "endpoints"]
    del value[data.draw(st.sampled_from(required))]
    with pytest.raises(ZnodeFormatError, match="missing field"):
        BrokerRegistration.decode(reg.broker_id, json.dumps(value).encode())
