"""PeerConnections against a real TCP listener: one connection per peer however many first requests race,
a closed one reopened on the next use, a peer without an endpoint refused."""

from __future__ import annotations

import asyncio

import pytest

from exactly.broker.peer_connections import PeerConnections


class _Listener:
    """A TCP server that only counts (and keeps) the connections it accepts."""

    def __init__(self) -> None:
        self.accepted: list[asyncio.StreamWriter] = []
        self._changed = asyncio.Event()

    async def accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted.append(writer)
        self._changed.set()

    async def until_accepted(self, count: int) -> None:
        async with asyncio.timeout(10):
            while len(self.accepted) < count:
                self._changed.clear()
                await self._changed.wait()


def test_concurrent_first_requests_share_one_connection_and_a_closed_one_is_reopened() -> None:
    async def scenario() -> None:
        listener = _Listener()
        server = await asyncio.start_server(listener.accept, "127.0.0.1", 0)
        accepted = listener.accepted
        port = server.sockets[0].getsockname()[1]
        peers = PeerConnections("test-peer", lambda b: ("127.0.0.1", port) if b == 7 else None, None)
        try:
            first = await asyncio.gather(*(peers.get(7) for _ in range(5)))
            assert len({id(c) for c in first}) == 1
            await listener.until_accepted(1)
            assert await peers.get(7) is first[0]

            peers.close(7)
            again = await peers.get(7)
            assert again is not first[0]
            await listener.until_accepted(2)

            with pytest.raises(ConnectionError, match="broker 8 has no inter-broker endpoint"):
                await peers.get(8)
            peers.close(8)  # nothing open: no error
            peers.close_all()
            third = await peers.get(7)
            assert third is not again
            await listener.until_accepted(3)
        finally:
            peers.close_all()
            for writer in accepted:
                writer.close()
            server.close()
            await server.wait_closed()

    asyncio.run(scenario())
