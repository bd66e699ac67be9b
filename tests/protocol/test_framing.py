from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exactly.errors import ProtocolError
from exactly.protocol.framing import FrameDecoder


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
