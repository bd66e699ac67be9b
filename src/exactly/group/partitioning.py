"""Which partition of an internal topic owns a key: `abs(javaHashCode(key)) % partitions`.

Kafka's `GroupCoordinatorShard`/`TransactionStateManager.partitionFor`: Java's `String.hashCode`
(sum of UTF-16 code units times 31^(n-1-i), wrapping at 32 bits), then `Utils.abs` (which maps
Integer.MIN_VALUE to 0 instead of overflowing), modulo the partition count. The same formula places
group ids in `__consumer_offsets` and transactional ids in `__transaction_state`, so a pipeline moved
between exactly and Kafka keeps its keys in the same partitions.

Every request of a coordinator asks for its key's partition, several times (ownership, append, apply),
and the hash is a Python loop over the key's UTF-16 units: `partition_for` remembers its answers for
the keys in use (a bounded cache; the function is pure).
"""

from __future__ import annotations

import struct
from functools import lru_cache

__all__ = ["java_string_hash", "partition_for"]

_INT_MIN = -(1 << 31)


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode()` as a signed 32-bit int."""
    raw = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", raw):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


@lru_cache(maxsize=1 << 16)
def partition_for(key: str, partitions: int) -> int:
    h = java_string_hash(key)
    return (0 if h == _INT_MIN else abs(h)) % partitions
