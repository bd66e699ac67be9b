"""A connection that ends leaves no reference cycle behind (issue 23: a Spark soak's broker grew with every
micro-batch). Its consumers close connections while a Fetch long-polls; the cancelled request's error held
the frame of the connection's writer, whose local referred back to the request: a cycle that kept the whole
connection (its 256-KiB read buffer, its open segment slices) until a full run of the cyclic GC, which the
broker's raised thresholds make rare. Reference counting alone must free a closed connection."""

from __future__ import annotations

import asyncio
import gc
import socket
import struct
from pathlib import Path

import exactly.broker.handlers  # noqa: F401  (registers the handlers)
from exactly.broker.config import BrokerConfig
from exactly.broker.connection import Connection
from exactly.broker.server import Broker
from exactly.client.connection import AsyncKafkaConnection
from exactly.protocol.api import ApiKey
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic


def _long_poll(topic: str) -> FetchRequest:
    """A read at the end of the partition that waits up to 30 s for data."""
    partition = FetchPartition(0, -1, 0, -1, -1, 1 << 20)
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=30_000,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=1,
        topics=[FetchTopic(topic, partitions=[partition])],
    )


async def _until(condition: object, within_s: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while not condition():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_connections_closed_idle_mid_fetch_or_reset_leave_no_cycle(tmp_path: Path) -> None:
    async def run() -> list[str]:
        props = {
            "log.dirs": str(tmp_path / "data"),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.num.partitions": "1",
        }
        broker = Broker(BrokerConfig.from_properties(props))
        await broker.start()
        gc.collect()
        gc.disable()  # from here on only reference counting frees what the connections leave
        try:
            await broker.topics.create_topic("t", 1, {})
            for _ in range(3):
                idle = await AsyncKafkaConnection.open("127.0.0.1", broker.port)
                await idle.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("t", "1"))
                polling = await AsyncKafkaConnection.open("127.0.0.1", broker.port)
                await polling.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("t", "1"))
                parked = asyncio.ensure_future(polling.request(ApiKey.FETCH, 12, _long_poll("t")))
                # the Fetch is parked in the broker, waiting for data
                await _until(lambda: any(c._requests for c in broker._connections.values()))
                assert not parked.done()
                reset = await AsyncKafkaConnection.open("127.0.0.1", broker.port)
                await reset.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("t", "1"))
                # a reset instead of a close: the broker reads ConnectionResetError, which its streams keep
                reset._writer.get_extra_info("socket").setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                idle.close()
                polling.close()
                reset.close()
                parked.cancel()  # the client's reader is gone with its connection: nothing answers it
            await _until(lambda: not broker._connections)
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            return sorted({type(o).__qualname__ for o in gc.garbage if isinstance(o, Connection)})
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
            broker.request_stop()
            await broker.stop()

    assert asyncio.run(run()) == []
