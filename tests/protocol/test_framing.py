from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exactly.errors import ProtocolError
from exactly.protocol.framing import Frame, FrameAssembler, FrameDecoder, FramePool


def _framed(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


@settings(max_examples=200, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=300), max_size=8),
    cuts=st.lists(st.integers(0, 3000), max_size=10),
)
def test_frames_come_out_whole_however_the_bytes_are_split(payloads: list[bytes], cuts: list[int]) -> None:
    stream = _framed(payloads)
    points = sorted({c for c in cuts if c < len(stream)} | {0, len(stream)})
    decoder = FrameDecoder(max_frame_size=1000)
    got: list[bytes] = []
    for a, b in itertools.pairwise(points):
        got.extend(decoder.frames(stream[a:b]))
    assert got == payloads
    assert decoder.buffered == 0


def test_oversized_frame_is_rejected_before_it_arrives() -> None:
    decoder = FrameDecoder(max_frame_size=100)
    decoder.feed(struct.pack(">i", 101))
    with pytest.raises(ProtocolError, match="frame size 101"):
        decoder.next_frame()


def test_negative_frame_size_is_rejected() -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError):
        decoder.frames(struct.pack(">i", -5) + b"xxxx")


def test_large_buffers_are_compacted() -> None:
    decoder = FrameDecoder()
    big = [bytes([i]) * 70_000 for i in range(5)]
    stream = _framed(big)
    got = decoder.frames(stream[:-10])
    assert got == big[:4]
    assert decoder.buffered == 70_004 - 10
    assert decoder.frames(stream[-10:]) == big[4:]


def _assemble(assembler: FrameAssembler, stream: bytes, cuts: list[int]) -> list[bytes]:
    """Feed `stream` through the assembler's lent buffers, each read at most up to the next cut."""
    points = sorted({c for c in cuts if 0 < c < len(stream)} | {len(stream)})
    got: list[bytes] = []
    pos = 0
    for point in points:
        while pos < point:
            target = assembler.get_buffer()
            assert len(target) > 0
            n = min(len(target), point - pos)
            target[:n] = stream[pos : pos + n]
            pos += n
            got.extend(bytes(frame) for frame in assembler.buffer_updated(n))
    return got


@settings(max_examples=300, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=300), max_size=8),
    big=st.lists(st.integers(0, 5000), max_size=3),
    cuts=st.lists(st.integers(0, 20_000), max_size=12),
    buffer_size=st.sampled_from([64, 256, 4096]),
)
def test_assembled_frames_come_out_whole_however_the_reads_fall(
    payloads: list[bytes], big: list[int], cuts: list[int], buffer_size: int
) -> None:
    frames = payloads + [bytes([i % 251]) * n for i, n in enumerate(big)]
    stream = _framed(frames)
    assembler = FrameAssembler(max_frame_size=10_000, buffer_size=buffer_size)
    assert _assemble(assembler, stream, cuts) == frames
    assert assembler.buffered == 0


def test_a_large_frame_is_read_into_its_own_buffer_and_handed_out_as_is() -> None:
    assembler = FrameAssembler(buffer_size=4096)
    payload = bytes(range(256)) * 40  # 10,240 bytes: from a quarter of the buffer on, a frame of its own
    stream = _framed([payload])
    target = assembler.get_buffer()
    target[:100] = stream[:100]
    assert assembler.buffer_updated(100) == []
    assert assembler.buffered == 96
    target = assembler.get_buffer()
    assert len(target) == len(payload) - 96  # the rest of the frame goes straight into place
    target[:] = stream[100:]
    (frame,) = assembler.buffer_updated(len(target))
    assert isinstance(frame, bytearray)
    assert frame == payload
    assert assembler.buffered == 0


def test_assembler_rejects_a_bad_frame_size() -> None:
    assembler = FrameAssembler(max_frame_size=100)
    assembler.get_buffer()[:4] = struct.pack(">i", 101)
    with pytest.raises(ProtocolError, match="frame size 101"):
        assembler.buffer_updated(4)


def _assemble_held(assembler: FrameAssembler, stream: bytes, cuts: list[int]) -> list[Frame]:
    """As `_assemble`, but the frames themselves are kept (a pooled frame is a view of a pool buffer)."""
    points = sorted({c for c in cuts if 0 < c < len(stream)} | {len(stream)})
    got: list[Frame] = []
    pos = 0
    for point in points:
        while pos < point:
            target = assembler.get_buffer()
            n = min(len(target), point - pos)
            target[:n] = stream[pos : pos + n]
            pos += n
            got.extend(assembler.buffer_updated(n))
    return got


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 70_000), max_size=8),
    cuts=st.lists(st.integers(0, 300_000), max_size=12),
    release=st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_a_pooled_frame_is_never_lent_again_while_referenced(
    sizes: list[int], cuts: list[int], release: list[bool]
) -> None:
    """Frames read through a pool are the bytes sent, whichever earlier frames were let go of meanwhile:
    a buffer still referenced (by its frame or a record view of it) is never written into again."""
    pool = FramePool()
    assembler = FrameAssembler(max_frame_size=100_000, buffer_size=4096, pool=pool)
    payloads = [bytes([i + 1]) * n for i, n in enumerate(sizes)]
    kept: list[tuple[bytes, memoryview]] = []
    for i, payload in enumerate(payloads):
        (frame,) = _assemble_held(assembler, _framed([payload]), cuts)
        assert bytes(frame) == payload
        if not release[i]:  # hold a record-like slice of it, not the frame itself
            kept.append((payload[1:], memoryview(frame)[1:]))
        del frame
    for payload, view in kept:
        assert bytes(view) == payload
    assert pool.kept <= pool.max_bytes


def test_a_pooled_buffer_is_lent_again_once_its_last_view_is_gone() -> None:
    pool = FramePool()
    assembler = FrameAssembler(buffer_size=4096, pool=pool)
    assert pool.allocated == 0  # no buffer before the first read
    payload = bytes(range(256)) * 400  # 102,400 bytes: a pooled frame
    (frame,) = _assemble_held(assembler, _framed([payload]), [])
    assert isinstance(frame, memoryview)
    assert pool.allocated == 2  # the small frames' buffer (the frame's start was read into it), the frame's
    records = frame[50:]  # what decoding keeps: a slice of the frame
    del frame
    assert pool.free() == 1  # the small frames' buffer, given back: nothing unread is left in it
    (second,) = _assemble_held(assembler, _framed([payload[::-1]]), [])
    assert pool.allocated == 3
    assert pool.reused == 1
    assert bytes(records) == payload[50:]
    del records
    assert pool.free() == 2
    del second
    assert pool.free() == 3
    (third,) = _assemble_held(assembler, _framed([payload]), [])
    assert pool.reused == 3
    assert bytes(third) == payload


def test_a_connection_holds_its_small_frame_buffer_only_while_part_of_a_frame_is_in_it() -> None:
    """Connections take their small-frame buffer from the listener's pool instead of allocating one each
    (a heap that fragments under connection churn), and give it back after each read that leaves nothing
    unread in it: an idle connection holds none (10,000 idle connections held 2.6 GB)."""
    pool = FramePool()
    first = FrameAssembler(pool=pool)
    second = FrameAssembler(pool=pool)
    assert pool.allocated == 0
    frames = _assemble_held(first, _framed([b"a" * 100, b"b" * 200]), [])
    assert [bytes(f) for f in frames] == [b"a" * 100, b"b" * 200]
    assert (pool.allocated, pool.free()) == (1, 1)  # idle: given back
    head = _framed([b"c" * 50])
    frames = _assemble_held(first, head[:30], [])  # part of a frame waits in it: held
    assert frames == []
    assert first.buffered == 30
    assert [bytes(f) for f in _assemble_held(second, _framed([b"d" * 70]), [])] == [b"d" * 70]
    assert (pool.allocated, pool.reused) == (2, 1)  # the first took its buffer again; the second, a new one
    assert pool.free() == 1  # the second's, given back
    target = first.get_buffer()
    target[: len(head) - 30] = head[30:]
    assert [bytes(f) for f in first.buffer_updated(len(head) - 30)] == [b"c" * 50]
    del target  # the transport's view of the read
    assert pool.free() == 2
    third = FrameAssembler(pool=pool)  # takes a kept buffer: stale bytes are never read
    assert [bytes(f) for f in _assemble_held(third, _framed([b"e" * 40]), [])] == [b"e" * 40]
    assert (pool.allocated, pool.reused) == (2, 2)
    del second


def test_a_pool_keeps_at_most_its_budget() -> None:
    pool = FramePool(max_bytes=1 << 18, max_buffer=1 << 17)
    held = [pool.frame(100_000) for _ in range(4)]  # 128 KiB buffers: two are kept
    assert pool.kept == 1 << 18
    big = pool.frame(200_000)  # above max_buffer: a bytearray of its own, never kept
    assert isinstance(big, bytearray)
    assert len(big) == 200_000
    assert all(len(h) == 100_000 for h in held)
    del held
    assert pool.free() == 2
