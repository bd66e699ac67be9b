"""A classic consumer group member's assignment, as its leader wrote it (Kafka's ConsumerProtocolAssignment).

The group coordinator stores the assignment as opaque bytes (SyncGroup); for the `consumer` protocol
type they follow Kafka's `ConsumerProtocolAssignment` schema (versions 0-3 share this layout; none is
flexible), big-endian:

    version            int16
    assigned_partitions int32 count, then per topic:
        topic          int16 length + UTF-8
        partitions     int32 count + int32 each
    user_data          int32 length (-1: null) + bytes      (ignored here)

Another protocol type (connect, a custom one) has its own format: `decode_assignment` returns None for
bytes it cannot read, and the console shows the member without an assignment.
"""

from __future__ import annotations

import struct

__all__ = ["decode_assignment", "encode_assignment"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def encode_assignment(partitions: dict[str, list[int]], version: int = 0) -> bytes:
    """The bytes a consumer group leader sends for one member (tests and tools)."""
    out = [_I16.pack(version), _I32.pack(len(partitions))]
    for topic, ids in partitions.items():
        name = topic.encode()
        out += [_I16.pack(len(name)), name, _I32.pack(len(ids)), *(_I32.pack(i) for i in ids)]
    out.append(_I32.pack(-1))
    return b"".join(out)


def decode_assignment(data: bytes) -> tuple[tuple[str, int], ...] | None:
    """The (topic, partition) pairs, sorted; None when `data` is not a consumer protocol assignment."""
    if not data:
        return ()
    try:
        (version,) = _I16.unpack_from(data, 0)
        if version < 0:
            return None
        (topics,) = _I32.unpack_from(data, 2)
        if topics < 0 or topics > len(data):
            return None
        pos = 6
        out: list[tuple[str, int]] = []
        for _ in range(topics):
            (length,) = _I16.unpack_from(data, pos)
            if length < 0 or pos + 2 + length > len(data):
                return None
            topic = data[pos + 2 : pos + 2 + length].decode()
            pos += 2 + length
            (count,) = _I32.unpack_from(data, pos)
            if count < 0 or pos + 4 + 4 * count > len(data):
                return None
            out += [(topic, p) for p in struct.unpack_from(f">{count}i", data, pos + 4)]
            pos += 4 + 4 * count
    except (struct.error, UnicodeDecodeError):
        return None
    return tuple(sorted(out))
