"""A client connection's incoming side as whole request frames, read in place (no stream buffer).

`FrameStream` is the transport's protocol: an `asyncio.BufferedProtocol` whose reads go straight into
`exactly.protocol.framing.FrameAssembler`'s buffers, so a produce request's bytes are copied once, from
the socket into the frame the handler appends from (through asyncio's StreamReader they were copied four
more times: into its buffer, out of it, into a frame decoder, out of that). TLS listeners use it too:
decrypted records are written into the same buffers. The listener's connections share one `FramePool`:
a large frame's buffer is lent again once the request read into it is done with.

The connection reads with `await frames.read()`: the frames complete so far (an empty list at EOF),
raising the connection's error (OSError) or a ProtocolError for a bad frame size, or TimeoutError once
after `interrupt()` (the connection's idle timer: one timer per connection, not one per read). While
more than twice `limit` bytes of frames wait to be read (as asyncio's StreamReader), the transport stops
reading (TCP flow control then holds the client).

Writing stays with asyncio's `StreamWriter`, whose drain needs a `StreamReaderProtocol`: the transport's
events (connection made and lost, EOF, write flow control) are passed on to one, which holds no data.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from exactly.errors import ProtocolError
from exactly.protocol.framing import DEFAULT_MAX_FRAME_SIZE, Frame, FrameAssembler, FramePool

__all__ = ["FrameStream"]

_SCRATCH = memoryview(bytearray(1 << 16))  # reads after a bad frame, thrown away


class FrameStream(asyncio.BufferedProtocol):
    def __init__(
        self,
        stream: asyncio.StreamReaderProtocol,
        limit: int,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        pool: FramePool | None = None,
    ) -> None:
        self._stream = stream
        self._limit = limit
        self._assembler = FrameAssembler(max_frame_size, pool=pool)
        self._ready: list[Frame] = []
        self._ready_bytes = 0
        self._transport: Any = None  # a ReadTransport (uvloop's are not registered as one)
        self._paused = False
        self._eof = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._interrupted = False

    # --- the transport's side -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._stream.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        # The wrapped stream is told of the loss but not given the error: it would keep it and raise that
        # very instance from the writer's drain(), taking the raising frames into its traceback, a
        # reference cycle back to the connection (its drain() raises a fresh ConnectionResetError).
        self._stream.connection_lost(None)
        if exc is not None and self._error is None:
            self._error = exc
        self._eof = True
        self._wake()

    def pause_writing(self) -> None:
        self._stream.pause_writing()

    def resume_writing(self) -> None:
        self._stream.resume_writing()

    def eof_received(self) -> bool | None:
        self._eof = True
        self._wake()
        return self._stream.eof_received()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._error is not None:
            return _SCRATCH
        return self._assembler.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self._error is not None:
            return
        try:
            frames = self._assembler.buffer_updated(nbytes)
        except ProtocolError as e:
            self._error = e
            self._pause()
            self._wake()
            return
        if not frames:
            return
        self._ready.extend(frames)
        self._ready_bytes += sum(map(len, frames))
        if self._ready_bytes > 2 * self._limit:
            self._pause()
        self._wake()

    # --- the connection's side ------------------------------------------------------------------------

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame."""
        return self._assembler.buffered

    async def read(self) -> list[Frame]:
        """The frames complete so far, waiting for one; [] at EOF. Raises the connection's error."""
        while not self._ready:
            if self._error is not None:
                # a copy: the stored error, raised, would hold this frame (and so this stream) in its
                # traceback, a reference cycle that keeps the connection until a full GC run
                raise _fresh(self._error)
            if self._eof:
                return []
            if self._interrupted:
                self._interrupted = False
                raise TimeoutError
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        frames, self._ready, self._ready_bytes = self._ready, [], 0
        if self._paused and self._error is None:
            self._paused = False
            if self._transport is not None and not self._transport.is_closing():
                self._transport.resume_reading()
        return frames

    def interrupt(self) -> None:
        """The `read()` waiting now, or the next one that would wait, raises TimeoutError."""
        self._interrupted = True
        self._wake()

    def _pause(self) -> None:
        transport = self._transport
        if not self._paused and transport is not None and not transport.is_closing():
            self._paused = True
            transport.pause_reading()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def _fresh(error: BaseException) -> BaseException:
    """A copy of `error` to raise (type, args, attributes), or `error` itself if it cannot be copied."""
    try:
        return copy.copy(error)
    except Exception:  # noqa: BLE001 (an exception type whose constructor does not take its args back)
        return error
