"""Sans-IO framing: bytes in, complete Kafka frames out.

Every Kafka request and response is `int32 size` followed by `size` bytes. `FrameDecoder` buffers what
arrives and hands out each complete frame (without the size prefix) as `bytes`, exactly one copy of the
frame. A size above `max_frame_size` (Kafka's `socket.request.max.bytes`) or below zero is a protocol
violation: the caller should close the connection.
"""

from __future__ import annotations

import struct

from exactly.errors import ProtocolError

_SIZE = struct.Struct(">i")
DEFAULT_MAX_FRAME_SIZE = 104_857_600  # socket.request.max.bytes


class FrameDecoder:
    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def next_frame(self) -> bytes | None:
        """The next complete frame, or None until more bytes arrive."""
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 4:
            return None
        (size,) = _SIZE.unpack_from(buf, pos)
        if size < 0 or size > self.max_frame_size:
            raise ProtocolError(f"frame size {size} outside 0..{self.max_frame_size}")
        end = pos + 4 + size
        if end > len(buf):
            return None
        with memoryview(buf) as view:
            frame = bytes(view[pos + 4 : end])
        if end == len(buf):
            buf.clear()
            self._pos = 0
        elif end > 65536 and end * 2 > len(buf):
            del buf[:end]
            self._pos = 0
        else:
            self._pos = end
        return frame

    def frames(self, data: bytes | bytearray | memoryview = b"") -> list[bytes]:
        """Feed `data` and return every frame that is now complete."""
        if data:
            self.feed(data)
        out: list[bytes] = []
        while (frame := self.next_frame()) is not None:
            out.append(frame)
        return out
