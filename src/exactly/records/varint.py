"""Variable-length integers as Kafka writes them (`ByteUtils.java`, protobuf base-128 encoding).

Wire format::

    unsigned varint : 7 bits per byte, least significant group first; the high bit (0x80) of a byte
                      says "another byte follows". uint32 takes 1..5 bytes, uint64 1..10 bytes.
    varint          : int32 zig-zag encoded, then written as an unsigned varint:
                          zigzag(v) = (v << 1) ^ (v >> 31)      0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3, ...
    varlong         : the same for int64: zigzag(v) = (v << 1) ^ (v >> 63), 1..10 bytes.

Decoding follows Java: a value longer than 5 (varint) or 10 (varlong) bytes is malformed, and the bits
of the last byte that do not fit in 32/64 bits are dropped (Java's int arithmetic truncates them).
Every decoder takes ``(buf, pos)`` and returns ``(value, new_pos)``; malformed or truncated input raises
`CorruptRecordError` (code INVALID_RECORD, as Kafka's `DefaultRecord` does) and nothing else.
"""

from __future__ import annotations

from exactly.errors import CorruptRecordError, ErrorCode

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "Buffer",
    "decode_unsigned_varint",
    "decode_unsigned_varlong",
    "decode_varint",
    "decode_varlong",
    "encode_unsigned_varint",
    "encode_unsigned_varlong",
    "encode_varint",
    "encode_varlong",
    "size_of_unsigned_varint",
    "size_of_varint",
    "size_of_varlong",
    "write_varint",
    "write_varlong",
]

Buffer = bytes | bytearray | memoryview

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_UINT32_MAX = (1 << 32) - 1
_UINT64_MAX = (1 << 64) - 1

# One-byte encodings, indexed by the (zig-zagged) value: the common case costs a tuple lookup.
_ONE_BYTE: tuple[bytes, ...] = tuple(bytes((i,)) for i in range(0x80))


def _malformed(what: str, pos: int) -> CorruptRecordError:
    return CorruptRecordError(f"malformed {what} at position {pos}", ErrorCode.INVALID_RECORD)


def _encode_unsigned(value: int) -> bytes:
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _decode_unsigned(buf: Buffer, pos: int, max_bytes: int, what: str) -> tuple[int, int]:
    """Slow path shared by every decoder; ``buf[pos]`` is known to have its continuation bit set."""
    start = pos
    result = 0
    shift = 0
    try:
        for _ in range(max_bytes):
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result, pos
            shift += 7
    except IndexError:
        raise CorruptRecordError(f"truncated {what} at position {start}", ErrorCode.INVALID_RECORD) from None
    raise _malformed(what, start)


# --- unsigned ------------------------------------------------------------------------------------------


def encode_unsigned_varint(value: int) -> bytes:
    """Encode a uint32 (0 .. 2**32-1) as an unsigned varint."""
    if not 0 <= value <= _UINT32_MAX:
        raise ValueError(f"unsigned varint out of range: {value}")
    return _encode_unsigned(value)


def encode_unsigned_varlong(value: int) -> bytes:
    """Encode a uint64 (0 .. 2**64-1) as an unsigned varlong."""
    if not 0 <= value <= _UINT64_MAX:
        raise ValueError(f"unsigned varlong out of range: {value}")
    return _encode_unsigned(value)


def decode_unsigned_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint (at most 5 bytes) at ``pos``; return ``(value, next_pos)``."""
    try:
        b = buf[pos]
    except IndexError:
        raise _malformed("unsigned varint (no data)", pos) from None
    if b < 0x80 and pos >= 0:
        return b, pos + 1
    if pos < 0:
        raise _malformed("unsigned varint (negative position)", pos)
    value, pos = _decode_unsigned(buf, pos, 5, "unsigned varint")
    return value & _UINT32_MAX, pos


def decode_unsigned_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode an unsigned varlong (at most 10 bytes) at ``pos``; return ``(value, next_pos)``."""
    try:
        b = buf[pos]
    except IndexError:
        raise _malformed("unsigned varlong (no data)", pos) from None
    if b < 0x80 and pos >= 0:
        return b, pos + 1
    if pos < 0:
        raise _malformed("unsigned varlong (negative position)", pos)
    value, pos = _decode_unsigned(buf, pos, 10, "unsigned varlong")
    return value & _UINT64_MAX, pos


def size_of_unsigned_varint(value: int) -> int:
    """Number of bytes `encode_unsigned_varint`/`encode_unsigned_varlong` writes for ``value``."""
    return max(1, (value.bit_length() + 6) // 7)


# --- signed (zig-zag) ----------------------------------------------------------------------------------


def encode_varint(value: int) -> bytes:
    """Encode an int32 as a zig-zag varint (`ByteUtils.writeVarint`)."""
    if -64 <= value <= 63:
        return _ONE_BYTE[(value << 1) ^ (value >> 31)]
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    return _encode_unsigned((value << 1) ^ (value >> 31))


def encode_varlong(value: int) -> bytes:
    """Encode an int64 as a zig-zag varlong (`ByteUtils.writeVarlong`)."""
    if -64 <= value <= 63:
        return _ONE_BYTE[(value << 1) ^ (value >> 63)]
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    return _encode_unsigned((value << 1) ^ (value >> 63))


def write_varint(out: bytearray, value: int) -> None:
    """Append the zig-zag varint encoding of the int32 ``value`` to ``out``."""
    if -64 <= value <= 63:
        out.append((value << 1) ^ (value >> 31))
    else:
        out += encode_varint(value)


def write_varlong(out: bytearray, value: int) -> None:
    """Append the zig-zag varlong encoding of the int64 ``value`` to ``out``."""
    if -64 <= value <= 63:
        out.append((value << 1) ^ (value >> 63))
    else:
        out += encode_varlong(value)


def decode_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint (int32, at most 5 bytes) at ``pos``; return ``(value, next_pos)``."""
    try:
        b = buf[pos]
    except IndexError:
        raise _malformed("varint (no data)", pos) from None
    if b < 0x80 and pos >= 0:
        return (b >> 1) ^ -(b & 1), pos + 1
    if pos < 0:
        raise _malformed("varint (negative position)", pos)
    try:
        b2 = buf[pos + 1]
    except IndexError:
        raise CorruptRecordError(f"truncated varint at position {pos}", ErrorCode.INVALID_RECORD) from None
    if b2 < 0x80:  # two bytes: lengths 64..8191, the next most common case
        raw = (b & 0x7F) | (b2 << 7)
        return (raw >> 1) ^ -(raw & 1), pos + 2
    raw, pos = _decode_unsigned(buf, pos, 5, "varint")
    raw &= _UINT32_MAX
    return (raw >> 1) ^ -(raw & 1), pos


def decode_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varlong (int64, at most 10 bytes) at ``pos``; return ``(value, next_pos)``."""
    try:
        b = buf[pos]
    except IndexError:
        raise _malformed("varlong (no data)", pos) from None
    if b < 0x80 and pos >= 0:
        return (b >> 1) ^ -(b & 1), pos + 1
    if pos < 0:
        raise _malformed("varlong (negative position)", pos)
    raw, pos = _decode_unsigned(buf, pos, 10, "varlong")
    raw &= _UINT64_MAX
    return (raw >> 1) ^ -(raw & 1), pos


def size_of_varint(value: int) -> int:
    """Encoded size in bytes of the int32 ``value`` as a zig-zag varint."""
    return size_of_unsigned_varint((value << 1) ^ (value >> 31))


def size_of_varlong(value: int) -> int:
    """Encoded size in bytes of the int64 ``value`` as a zig-zag varlong."""
    return size_of_unsigned_varint((value << 1) ^ (value >> 63))
