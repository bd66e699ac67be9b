"""The marker channel's shell: local partitions written in-process, the rest batched per destination
broker as WriteTxnMarkers, unreachable or unknown leaders answered with codes that are retried."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from exactly.broker.marker_channel import Codes, MarkerChannel, Markers, marker_request, response_codes
from exactly.errors import ErrorCode
from exactly.protocol.messages.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)
from exactly.testing.processes import free_port

COMMIT = Markers(producer_id=7, producer_epoch=3, commit=True, coordinator_epoch=5)


def test_request_groups_partitions_by_topic_and_carries_the_coordinator_epoch() -> None:
    abort = Markers(8, 1, False, 5)
    request = marker_request([(COMMIT, [("a", 0), ("a", 2), ("b", 1)]), (abort, [("b", 0)])])
    first, second = request.markers
    assert (first.producer_id, first.producer_epoch, first.transaction_result, first.coordinator_epoch) == (
        7,
        3,
        True,
        5,
    )
    assert [(t.name, t.partition_indexes) for t in first.topics] == [("a", [0, 2]), ("b", [1])]
    assert (second.producer_id, second.transaction_result) == (8, False)
    assert [(t.name, t.partition_indexes) for t in second.topics] == [("b", [0])]


def test_response_codes_per_transaction_and_unanswered_partitions_retried() -> None:
    items = [(COMMIT, [("a", 0), ("a", 1)]), (Markers(8, 1, False, 5), [("b", 0)])]
    response = WriteTxnMarkersResponse(
        [
            WritableTxnMarkerResult(
                7,
                [
                    WritableTxnMarkerTopicResult(
                        "a",
                        [
                            WritableTxnMarkerPartitionResult(0, 0),
                            WritableTxnMarkerPartitionResult(1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
                        ],
                    )
                ],
            )
        ]
    )
    first, second = response_codes(items, response)
    assert first == {("a", 0): ErrorCode.NONE, ("a", 1): ErrorCode.NOT_LEADER_OR_FOLLOWER}
    assert second == {("b", 0): ErrorCode.NETWORK_EXCEPTION}


def test_single_broker_writes_every_marker_locally() -> None:
    written: list[tuple[Markers, list[tuple[str, int]], bool]] = []

    async def write_local(
        markers: Markers, partitions: Sequence[tuple[str, int]], *, behind_answer: bool = False
    ) -> Codes:
        written.append((markers, list(partitions), behind_answer))
        return dict.fromkeys(partitions, ErrorCode.NONE)

    async def run() -> tuple[Codes, Codes]:
        channel = MarkerChannel(1, write_local)
        try:
            first = await channel.send(COMMIT, [("b", 0), ("a", 1)], behind_answer=True)
            return first, await channel.send(COMMIT, [("c", 0)])
        finally:
            await channel.stop()

    codes, more = asyncio.run(run())
    assert codes == {("a", 1): ErrorCode.NONE, ("b", 0): ErrorCode.NONE}
    assert more == {("c", 0): ErrorCode.NONE}
    assert written == [(COMMIT, [("a", 1), ("b", 0)], True), (COMMIT, [("c", 0)], False)]


def test_cluster_routes_local_unknown_and_unreachable_leaders() -> None:
    leaders = {("t", 0): 1, ("t", 1): 2, ("t", 2): -1}
    port = free_port()  # nothing listens there: the connection is refused

    async def write_local(
        markers: Markers, partitions: Sequence[tuple[str, int]], *, behind_answer: bool = False
    ) -> Codes:
        return dict.fromkeys(partitions, ErrorCode.NONE)

    async def run() -> Codes:
        channel = MarkerChannel(
            1,
            write_local,
            leader_of=lambda t, p: leaders[(t, p)],
            endpoint_of=lambda broker: ("127.0.0.1", port) if broker == 2 else None,
            request_timeout_s=5.0,
        )
        try:
            return await channel.send(COMMIT, list(leaders))
        finally:
            await channel.stop()

    codes = asyncio.run(run())
    assert codes == {
        ("t", 0): ErrorCode.NONE,
        ("t", 1): ErrorCode.NETWORK_EXCEPTION,
        ("t", 2): ErrorCode.NOT_LEADER_OR_FOLLOWER,
    }
