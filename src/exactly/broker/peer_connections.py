"""One client connection per peer broker, opened on first use on its inter-broker listener and shared by
every request to that broker (requests are pipelined on it).

Used by the brokers' own RPCs to each other's coordinators: KIP-890's verification of a transactional
partition (exactly.broker.txn_verifier) and the share-group state persister
(exactly.broker.share_persister). Opening is serialised per broker, so concurrent first requests open one
connection, not one each. A caller whose request failed on a connection drops it (`close(broker)`); the
next request opens a new one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from exactly.client.connection import AsyncKafkaConnection
from exactly.client.security import ClientSecurity

__all__ = ["EndpointOf", "PeerConnections"]

EndpointOf = Callable[[int], tuple[str, int] | None]  # broker id -> its inter-broker (host, port)


class PeerConnections:
    __slots__ = ("_connections", "_endpoint_of", "_opening", "client_id", "security")

    def __init__(self, client_id: str, endpoint_of: EndpointOf, security: ClientSecurity | None) -> None:
        self.client_id = client_id
        self.security = security
        self._endpoint_of = endpoint_of
        self._connections: dict[int, AsyncKafkaConnection] = {}
        self._opening: dict[int, asyncio.Lock] = {}

    async def get(self, broker: int) -> AsyncKafkaConnection:
        """The connection to `broker`, opened if there is none (ConnectionError: no endpoint known)."""
        lock = self._opening.setdefault(broker, asyncio.Lock())
        async with lock:
            connection = self._connections.get(broker)
            if connection is None:
                endpoint = self._endpoint_of(broker)
                if endpoint is None:
                    raise ConnectionError(f"broker {broker} has no inter-broker endpoint")
                connection = await AsyncKafkaConnection.open(
                    *endpoint, client_id=self.client_id, security=self.security
                )
                self._connections[broker] = connection
            return connection

    def close(self, broker: int) -> None:
        connection = self._connections.pop(broker, None)
        if connection is not None:
            connection.close()

    def close_all(self) -> None:
        for broker in list(self._connections):
            self.close(broker)
