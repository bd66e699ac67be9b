"""Sans-IO framing: bytes in, complete Kafka frames out.

Every Kafka request and response is `int32 size` followed by `size` bytes. `FrameDecoder` buffers what
arrives and hands out each complete frame (without the size prefix) as `bytes`, exactly one copy of the
frame. A size above `max_frame_size` (Kafka's `socket.request.max.bytes`) or below zero is a protocol
violation: the caller should close the connection.

`FrameAssembler` is the same for a reader that reads into buffers it is lent (`get_buffer`, then
`buffer_updated`, as asyncio's `BufferedProtocol`): a large frame (a produce request's batches) is read
straight into a bytearray of its own, which is the frame handed out, so its bytes are copied once, from
the socket into place, and never again; smaller frames are read into one reused buffer and copied out.

`FramePool` lends those large frames' buffers again once nothing references them any more, so a busy
producer's requests are not each a fresh allocation that the kernel must zero and fault in page by page
(`bytearray(size)` zero-fills it too, before the socket overwrites every byte). A pooled frame is a
memoryview of the first `size` bytes of a buffer whose length is a power of two. Whether a buffer is free
is CPython's reference count: every memoryview of it (the frame, the record fields decoded from it, a
slice of those) holds a reference to the bytearray, so a buffer that only the pool refers to has no
reader left; a buffer still referenced anywhere (a request being handled, a frame waiting to be read, a
reference cycle not yet collected) is simply not lent again.

With a pool, a connection's reused buffer of smaller frames is the pool's too, and held only while part of
a frame waits in it: a read that ends on a frame boundary gives it back, the next read takes one again.
An idle connection holds none, so 10,000 idle connections cost no 256 KiB each (they did: 2.6 GB).
"""

from __future__ import annotations

import struct
import sys

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


Frame = bytes | bytearray | memoryview

_OWN_BUFFER_MIN = 1 << 15  # frames from this size on are read into a bytearray of their own
_BUFFER_SIZE = 1 << 18  # the reused buffer of the smaller frames
_COMPACT_BELOW = 1 << 16  # room left in the reused buffer below which its unread bytes move to its start
_LEND_MAX = 1 << 16  # the most of the reused buffer lent at once: what a large frame's start costs a copy
_NO_BUFFER = bytearray()  # a pooled assembler's reused buffer between reads
_NO_VIEW = memoryview(_NO_BUFFER)


_POOL_MIN = 1 << 15  # the smallest pooled buffer
_POOL_MAX_BUFFER = 1 << 24  # frames above 16 MiB get a buffer of their own, as without a pool
_POOL_MAX_BYTES = 1 << 26  # what a pool keeps at most, lent or not
_HELD_ONLY_BY_POOL = 3  # sys.getrefcount of a free buffer: the pool's list, the loop variable, the call


class FramePool:
    """Buffers for large frames, lent again once nothing refers to them (see the module docstring).
    Not thread-safe: one event loop's connections share one. Keeps at most `max_bytes` of buffers; a
    frame that finds no free buffer and no room gets one that is not kept."""

    def __init__(self, max_bytes: int = _POOL_MAX_BYTES, max_buffer: int = _POOL_MAX_BUFFER) -> None:
        self.max_bytes = max_bytes
        self.max_buffer = max_buffer
        self._classes: dict[int, list[bytearray]] = {}  # buffer length -> the buffers of that length
        self.kept = 0  # bytes of buffers kept
        self.reused = 0  # frames lent a buffer again
        self.allocated = 0  # frames that needed a new buffer

    def frame(self, size: int) -> memoryview | bytearray:
        """A writable buffer of exactly `size` bytes (its content undefined) for a frame being read."""
        length = max(_POOL_MIN, 1 << (size - 1).bit_length())
        if length > self.max_buffer:
            self.allocated += 1
            return bytearray(size)
        return memoryview(self._take(length))[:size]

    def lend(self, length: int) -> bytearray:
        """A whole buffer of at least `length` bytes (a power of two), its content undefined: the reused
        buffer of a connection's small frames, back in the pool once the connection drops it (after each
        read that leaves no part of a frame in it, see `FrameAssembler`). Taking it
        from the pool instead of allocating one per connection keeps a broker whose clients connect and
        leave all day from fragmenting its heap (the Spark soak's RSS grew ~11 KB a batch with a fresh
        256-KiB buffer per connection)."""
        return self._take(max(_POOL_MIN, 1 << (length - 1).bit_length()))

    def _take(self, length: int) -> bytearray:
        """A free kept buffer of `length` bytes, else a new one (kept while within the budget)."""
        buffers = self._classes.setdefault(length, [])
        for buf in buffers:
            if sys.getrefcount(buf) == _HELD_ONLY_BY_POOL:
                self.reused += 1
                return buf
        self.allocated += 1
        buf = bytearray(length)
        if length <= self.max_buffer and self.kept + length <= self.max_bytes:
            buffers.append(buf)
            self.kept += length
        return buf

    def free(self) -> int:
        """How many kept buffers are free to lend (for tests and metrics)."""
        free = 0
        for buffers in self._classes.values():
            for buf in buffers:
                if sys.getrefcount(buf) == _HELD_ONLY_BY_POOL:
                    free += 1
        return free


class FrameAssembler:
    """Complete frames from reads into lent buffers: `get_buffer()` says where the next read goes,
    `buffer_updated(n)` that `n` bytes arrived there and returns the frames they completed. With a
    `pool`, large frames are memoryviews of its buffers; without one, each is a bytearray of its own."""

    def __init__(
        self,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        buffer_size: int = _BUFFER_SIZE,
        pool: FramePool | None = None,
    ) -> None:
        self.max_frame_size = max_frame_size
        self._pool = pool
        self._own_min = min(_OWN_BUFFER_MIN, buffer_size // 4)
        self._size = max(buffer_size, 64)
        # with a pool, taken by the first read and given back whenever no unread byte is left in it
        self._buf = bytearray(self._size) if pool is None else _NO_BUFFER
        self._view = memoryview(self._buf) if pool is None else _NO_VIEW
        self._start = 0  # first byte of _buf not yet part of a frame handed out
        self._end = 0  # end of the bytes read into _buf
        self._frame: bytearray | memoryview | None = None  # a large frame being read into place
        self._frame_view = memoryview(b"")
        self._filled = 0  # bytes of `_frame` read so far

    @property
    def buffered(self) -> int:
        """Bytes of a frame that is not complete yet."""
        return self._filled if self._frame is not None else self._end - self._start

    def get_buffer(self) -> memoryview:
        """Where the next read should go (never empty)."""
        if self._frame is not None:
            return self._frame_view[self._filled :]
        if self._pool is not None and self._buf is _NO_BUFFER:
            self._buf = self._pool.lend(self._size)
            self._view = memoryview(self._buf)
        if len(self._buf) - self._end < _COMPACT_BELOW and self._start > 0:
            unread = self._end - self._start
            self._buf[:unread] = self._view[self._start : self._end]
            self._start, self._end = 0, unread
        return self._view[self._end : self._end + _LEND_MAX]

    def buffer_updated(self, nbytes: int) -> list[Frame]:
        """`nbytes` were read into the last buffer lent; the frames now complete, in order. Raises
        ProtocolError for a frame size outside 0..max_frame_size (the connection should close)."""
        frames: list[Frame] = []
        if self._frame is not None:
            self._filled += nbytes
            if self._filled < len(self._frame):
                return frames
            frames.append(self._frame)
            self._frame, self._frame_view, self._filled = None, memoryview(b""), 0
            return frames
        self._end += nbytes
        buf, view, start, end = self._buf, self._view, self._start, self._end
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(buf, start)
            if size < 0 or size > self.max_frame_size:
                raise ProtocolError(f"frame size {size} outside 0..{self.max_frame_size}")
            there = end - start - 4
            if there >= size:
                frames.append(bytes(view[start + 4 : start + 4 + size]))
                start += 4 + size
                continue
            if size >= self._own_min:  # read the rest straight into the frame's own buffer
                frame = bytearray(size) if self._pool is None else self._pool.frame(size)
                frame[:there] = view[start + 4 : end]
                self._frame, self._frame_view, self._filled = frame, memoryview(frame), there
                start = end
            break
        if start == end:
            start = end = 0
            if self._pool is not None:  # nothing unread in it: back to the pool (`lend`)
                self._buf, self._view = _NO_BUFFER, _NO_VIEW
        self._start, self._end = start, end
        return frames
