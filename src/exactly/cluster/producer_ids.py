"""Producer id allocation from durably reserved blocks (Kafka's ProducerIdManager, single node).

A block of `block_size` ids is reserved in the cluster metadata log before any id from it is handed out,
so a restart continues after the last reserved block and never reuses an id.
"""

from __future__ import annotations

from exactly.cluster.metadata import ClusterMetadata

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, metadata: ClusterMetadata, block_size: int = BLOCK_SIZE) -> None:
        self._metadata = metadata
        self._block_size = block_size
        self._block: range = range(0)
        self._next = 0

    def next_id(self) -> int:
        if self._next >= self._block.stop:
            self._block = self._metadata.reserve_producer_ids(self._block_size)
            self._next = self._block.start
        pid = self._next
        self._next += 1
        return pid
