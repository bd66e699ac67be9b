"""Pipelined requests on one connection against a broker built in-process: every request is answered,
in the order sent, whether the responses go out one write each or several in one write (the responses
ready in one loop turn), with a produce without answer (acks=0) and a failing request among them."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import exactly.broker.handlers  # noqa: F401  (registers the handlers)
from exactly.broker.config import BrokerConfig
from exactly.broker.server import Broker
from exactly.protocol.api import decode_response, encode_request
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from exactly.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from tests.storage.helpers import data_batch


@asynccontextmanager
async def running(tmp_path: Path) -> AsyncIterator[Broker]:
    props = {
        "log.dirs": str(tmp_path / "data"),
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "exactly.debug.raise.in.api": "ListOffsets",
    }
    broker = Broker(BrokerConfig.from_properties(props))
    await broker.start()
    try:
        await broker.topics.create_topic("t", 1, {})
        yield broker
    finally:
        broker.request_stop()
        await broker.stop()


def _requests(n: int) -> list[tuple[int, int, Any]]:
    """(api key, version, body) of n requests: ApiVersions, Metadata, produce acks=1 and acks=0 in turn."""
    out: list[tuple[int, int, Any]] = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            out.append((ApiKey.API_VERSIONS, 3, ApiVersionsRequest("pipelining", "1")))
        elif kind == 1:
            out.append((ApiKey.METADATA, 12, MetadataRequest([MetadataRequestTopic(name="t")], False)))
        else:
            batch = data_batch(1)
            data = [TopicProduceData("t", partition_data=[PartitionProduceData(0, batch)])]
            out.append((ApiKey.PRODUCE, 9, ProduceRequest(None, 1 if kind == 2 else 0, 5000, data)))
    return out


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


async def _pipeline(port: int, requests: list[tuple[int, int, Any]], at_once: bool) -> list[tuple[int, Any]]:
    """Send every request before reading any answer (in one write, or one write each); the answers."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    frames = [encode_request(k, v, i + 1, "pipelining", body) for i, (k, v, body) in enumerate(requests)]
    if at_once:
        writer.write(b"".join(frames))
    else:
        for frame in frames:
            writer.write(frame)
            await writer.drain()
    answered = []
    for i, (key, version, body) in enumerate(requests):
        if key == ApiKey.PRODUCE and body.acks == 0:
            continue  # no answer
        answered.append(decode_response(key, version, await asyncio.wait_for(_read_frame(reader), 30)))
        assert answered[-1][0] == i + 1, "answers out of order"
    writer.close()
    return answered


def test_pipelined_requests_are_answered_in_order(tmp_path: Path) -> None:
    async def run() -> None:
        async with running(tmp_path) as broker:
            requests = _requests(60)
            for at_once in (True, False):
                answers = await _pipeline(broker.port, requests, at_once)
                assert len(answers) == 45  # 60 less the 15 acks=0 produces
                produced = [body for _, body in answers if hasattr(body, "responses")]
                assert all(b.responses[0].partition_responses[0].error_code == 0 for b in produced)
                metadata = [body for _, body in answers if hasattr(body, "brokers")]
                assert all(m.topics[0].name == "t" and m.topics[0].error_code == 0 for m in metadata)

    asyncio.run(run())


def test_a_failing_request_among_pipelined_ones_is_answered_with_its_error(tmp_path: Path) -> None:
    async def run() -> None:
        async with running(tmp_path) as broker:
            failing = ListOffsetsRequest(-1, 0, [ListOffsetsTopic("t", [ListOffsetsPartition(0, -1, -1)])], 0)
            requests = [*_requests(4), (ApiKey.LIST_OFFSETS, 7, failing), *_requests(4)]
            answers = await _pipeline(broker.port, requests, at_once=True)
            assert len(answers) == 7
            (listed,) = [
                body for _, body in answers if hasattr(body, "topics") and not hasattr(body, "brokers")
            ]
            assert listed.topics[0].partitions[0].error_code != 0  # UNKNOWN_SERVER_ERROR, connection kept

    asyncio.run(run())
