"""The committed generated modules are exactly what tools/gen_protocol.py writes today."""

from __future__ import annotations

import dataclasses
import typing
from types import UnionType

from exactly.compiled import compiled_modules
from exactly.protocol.messages import MODULES
from exactly.protocol.messages.produce import NodeEndpoint, ProduceResponse, TopicProduceResponse
from exactly.protocol.primitives import struct_lists
from tools import gen_protocol


def test_generated_modules_are_up_to_date() -> None:
    assert gen_protocol.main(["--check"]) == 0, "run `make gen` and commit the result"


def test_every_api_of_the_minimal_set_is_generated() -> None:
    # shared/reference/kafka-wire.md §1.3: the minimal set, the recommended extras and KIP-664.
    expected = {
        "ApiVersions": (0, 4),
        "Metadata": (0, 12),
        "Produce": (3, 9),
        "Fetch": (4, 12),
        "ListOffsets": (1, 7),
        "FindCoordinator": (0, 4),
        "JoinGroup": (0, 7),
        "SyncGroup": (0, 5),
        "Heartbeat": (0, 4),
        "LeaveGroup": (0, 5),
        "OffsetCommit": (2, 8),
        "OffsetFetch": (1, 8),
        "InitProducerId": (0, 4),
        "AddPartitionsToTxn": (0, 3),
        "AddOffsetsToTxn": (0, 3),
        "EndTxn": (0, 3),
        "TxnOffsetCommit": (0, 3),
        "CreateTopics": (2, 7),
        "DeleteTopics": (1, 6),
        "DescribeConfigs": (1, 4),
        "CreatePartitions": (0, 3),
        "DescribeGroups": (0, 5),
        "ListGroups": (0, 5),
        "DeleteGroups": (0, 2),
        "DescribeCluster": (0, 1),
        "OffsetForLeaderEpoch": (2, 4),
        "OffsetDelete": (0, 0),
        "DescribeProducers": (0, 0),
        "DescribeTransactions": (0, 0),
        "ListTransactions": (0, 1),
        "WriteTxnMarkers": (1, 1),
    }
    for api, (lo, hi) in expected.items():
        got_lo, got_hi = gen_protocol.APIS[api]
        assert got_lo <= lo, api
        assert got_hi >= hi, api


def test_struct_lists_name_every_list_of_structs_the_annotations_declare() -> None:
    """`struct_lists` (the generated `STRUCT_LISTS`) against the annotations, in every module that runs as
    pure Python (the compiled build erases annotations to `list`; the generator writes both from one spec)."""
    compiled = set(compiled_modules())
    checked = 0
    for module in MODULES.values():
        if module.__name__ in compiled:
            continue
        for cls in vars(module).values():
            if not (
                isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == module.__name__
            ):
                continue
            declared = {}
            for name, hint in typing.get_type_hints(cls).items():
                for option in typing.get_args(hint) if isinstance(hint, UnionType) else (hint,):
                    if typing.get_origin(option) is list and dataclasses.is_dataclass(
                        typing.get_args(option)[0]
                    ):
                        declared[name] = typing.get_args(option)[0]
            assert struct_lists(cls) == declared, cls
            checked += 1
    assert checked > 300  # the message classes of 71 APIs
    assert struct_lists(ProduceResponse) == {
        "responses": TopicProduceResponse,
        "node_endpoints": NodeEndpoint,
    }
    assert struct_lists(int) == {}
