"""Kafka protocol primitive types: the helpers that generated message codecs call.

Wire formats (all integers big-endian; KIP-482 for the compact forms):

    int8/int16/int32/int64, uint16, float64, bool (1 byte, 0 = false)
    uuid            16 raw bytes
    uvarint         unsigned LEB128 (7 bits per byte, high bit = more)
    string          int16 length, UTF-8 bytes; -1 = null (nullable only)
    compact string  uvarint(length + 1), UTF-8 bytes; 0 = null
    bytes           int32 length, raw bytes; -1 = null
    compact bytes   uvarint(length + 1), raw bytes; 0 = null
    array           int32 count, elements; -1 = null
    compact array   uvarint(count + 1), elements; 0 = null
    tagged fields   uvarint count, then per field: uvarint tag, uvarint size, `size` bytes

Decoders take a `memoryview` and a position and return `(value, new_position)`. They may raise
`struct.error`, `IndexError` or `UnicodeDecodeError` on truncated or malformed input; the public entry
points in `exactly.protocol.api` turn every such failure into `ProtocolError`. Length checks that Python
slicing would silently skip (a slice past the end is merely short) are done explicitly here.
"""

from __future__ import annotations

import struct
import sys
import uuid
from typing import Any, TypeVar

from exactly.errors import ProtocolError

__all__ = ["ProtocolError"]  # re-exported for the generated decoders

Chunk = bytes | bytearray | memoryview
"""One piece of an encoded message; encoders append these to a list that is joined or written as is."""

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
UUID_ZERO: uuid.UUID = uuid.UUID(int=0)

_NULL_INT16 = b"\xff\xff"
_NULL_INT32 = b"\xff\xff\xff\xff"

# Pre-encoded uvarints for small values: most lengths and counts on the wire are below 128.
_SMALL_UVARINTS = tuple(bytes([i]) for i in range(128))


def struct_lists(cls: type) -> dict[str, type[Any]]:
    """Field name -> element class of a generated message class's lists of structs (its module's
    `STRUCT_LISTS`, which the generator writes; the annotations say the same, but the compiled build erases
    them to `list`). {} for any other class."""
    tables: dict[type, dict[str, type[Any]]] = getattr(sys.modules[cls.__module__], "STRUCT_LISTS", {})
    return tables.get(cls, {})


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    b2 = buf[pos + 1]
    if b2 < 0x80:
        return (b & 0x7F) | (b2 << 7), pos + 2
    b3 = buf[pos + 2]
    if b3 < 0x80:
        return (b & 0x7F) | ((b2 & 0x7F) << 7) | (b3 << 14), pos + 3
    result = (b & 0x7F) | ((b2 & 0x7F) << 7) | ((b3 & 0x7F) << 14)
    shift = 21
    pos += 2
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 28:
            raise ProtocolError("unsigned varint longer than 5 bytes")


def uvarint(value: int) -> bytes:
    if value < 128:
        return _SMALL_UVARINTS[value]
    if value >> 32:
        raise ValueError(f"uvarint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _take(buf: memoryview, pos: int, n: int) -> int:
    end = pos + n
    if n < 0 or end > len(buf):
        raise ProtocolError(f"length {n} at position {pos} runs past the end of the frame ({len(buf)} bytes)")
    return end


# --- strings ----------------------------------------------------------------------------------------------


def read_string(buf: memoryview, pos: int) -> tuple[str, int]:
    (n,) = INT16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        raise ProtocolError("null in a non-nullable string")
    end = _take(buf, pos, n)
    return str(buf[pos:end], "utf-8"), end


def read_nullable_string(buf: memoryview, pos: int) -> tuple[str | None, int]:
    (n,) = INT16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    end = _take(buf, pos, n)
    return str(buf[pos:end], "utf-8"), end


def read_compact_string(buf: memoryview, pos: int) -> tuple[str, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise ProtocolError("null in a non-nullable compact string")
    end = _take(buf, pos, n - 1)
    return str(buf[pos:end], "utf-8"), end


def read_compact_nullable_string(buf: memoryview, pos: int) -> tuple[str | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _take(buf, pos, n - 1)
    return str(buf[pos:end], "utf-8"), end


_T = TypeVar("_T")


def required(value: _T | None) -> _T:
    if value is None:
        raise ValueError("null is not allowed for this field in this version")
    return value


def _required(value: object) -> None:
    if value is None:
        raise ValueError("null is not allowed for this field in this version")


def string(value: str | None) -> bytes:
    _required(value)
    assert value is not None
    data = value.encode()
    if len(data) > 0x7FFF:
        raise ValueError("string longer than 32767 bytes")
    return INT16.pack(len(data)) + data


def nullable_string(value: str | None) -> bytes:
    return _NULL_INT16 if value is None else string(value)


def compact_string(value: str | None) -> bytes:
    _required(value)
    assert value is not None
    data = value.encode()
    return uvarint(len(data) + 1) + data


def compact_nullable_string(value: str | None) -> bytes:
    return b"\x00" if value is None else compact_string(value)


# --- bytes ------------------------------------------------------------------------------------------------


def read_bytes(buf: memoryview, pos: int) -> tuple[bytes, int]:
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        raise ProtocolError("null in non-nullable bytes")
    end = _take(buf, pos, n)
    return bytes(buf[pos:end]), end


def read_nullable_bytes(buf: memoryview, pos: int) -> tuple[bytes | None, int]:
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    end = _take(buf, pos, n)
    return bytes(buf[pos:end]), end


def read_compact_bytes(buf: memoryview, pos: int) -> tuple[bytes, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise ProtocolError("null in non-nullable compact bytes")
    end = _take(buf, pos, n - 1)
    return bytes(buf[pos:end]), end


def read_compact_nullable_bytes(buf: memoryview, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _take(buf, pos, n - 1)
    return bytes(buf[pos:end]), end


def bytes_(value: Chunk | None) -> bytes:
    _required(value)
    assert value is not None
    return INT32.pack(len(value)) + bytes(value)


def nullable_bytes(value: Chunk | None) -> bytes:
    return _NULL_INT32 if value is None else bytes_(value)


def compact_bytes(value: Chunk | None) -> bytes:
    _required(value)
    assert value is not None
    return uvarint(len(value) + 1) + bytes(value)


def compact_nullable_bytes(value: Chunk | None) -> bytes:
    return b"\x00" if value is None else compact_bytes(value)


# --- records: like nullable bytes, but zero-copy both ways -----------------------------------------------


def read_records(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    end = _take(buf, pos, n)
    return buf[pos:end], end


def read_compact_records(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = pos + n - 1
    if end > len(buf):
        raise ProtocolError(f"records of {n - 1} bytes run past the end of the frame")
    return buf[pos:end], end


def records_len(value: Chunk | None) -> bytes:
    return _NULL_INT32 if value is None else INT32.pack(len(value))


def compact_records_len(value: Chunk | None) -> bytes:
    return b"\x00" if value is None else uvarint(len(value) + 1)


# --- arrays -----------------------------------------------------------------------------------------------


def read_array_len(buf: memoryview, pos: int) -> tuple[int, int]:
    """Element count of a classic array, -1 for null. Counts that cannot fit the frame are rejected."""
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n > len(buf) - pos:
        raise ProtocolError(f"array of {n} elements cannot fit in the frame")
    return n, pos


def read_compact_array_len(buf: memoryview, pos: int) -> tuple[int, int]:
    """Element count of a compact array, -1 for null."""
    n, pos = read_uvarint(buf, pos)
    n -= 1
    if n > len(buf) - pos:
        raise ProtocolError(f"array of {n} elements cannot fit in the frame")
    return n, pos


def array_len(n: int) -> bytes:
    return INT32.pack(n)


def compact_array_len(n: int) -> bytes:
    return uvarint(n + 1)


NULL_ARRAY = _NULL_INT32
NULL_COMPACT_ARRAY = b"\x00"


# --- tagged fields ----------------------------------------------------------------------------------------


def skip_tagged_fields(buf: memoryview, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos = _take(buf, pos, size)
    return pos


def read_tag_header(buf: memoryview, pos: int) -> tuple[int, int, int]:
    """Returns (tag, end of the field's data, start of the field's data)."""
    tag, pos = read_uvarint(buf, pos)
    size, pos = read_uvarint(buf, pos)
    return tag, _take(buf, pos, size), pos


def tagged_fields(fields: list[tuple[int, bytes]]) -> bytes:
    out = [uvarint(len(fields))]
    for tag, data in fields:
        out.append(uvarint(tag))
        out.append(uvarint(len(data)))
        out.append(data)
    return b"".join(out)


_ZERO_BYTES = bytes(16)


def read_uuid(raw: bytes) -> uuid.UUID:
    if raw == _ZERO_BYTES:  # the usual value (no topic id: a request by name); UUID() costs ~1.5 us
        return UUID_ZERO
    return uuid.UUID(bytes=raw)
