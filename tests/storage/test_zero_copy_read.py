"""PartitionLog.read(zero_copy=True): the same whole batches as a copying read, as a FileSlice of the
segment file (what a plaintext Fetch sends with sendfile), which stays readable when the segment's own
descriptor is closed."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from exactly.storage.config import LogConfig
from exactly.storage.file_slice import MAX_OPEN, FileSlice
from exactly.storage.log import Isolation

from .helpers import data_batch, leader_append, open_log


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 400), min_size=1, max_size=12),
    fetch=st.integers(0, 40),
    max_bytes=st.integers(0, 3000),
    min_one=st.booleans(),
    segment_bytes=st.sampled_from([2000, 1 << 20]),
)
def test_zero_copy_reads_the_same_batches_as_a_copying_read(
    sizes: list[int], fetch: int, max_bytes: int, min_one: bool, segment_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        plog = open_log(Path(tmp) / "t-0", LogConfig(segment_bytes=segment_bytes))
        for i, size in enumerate(sizes):
            leader_append(plog, data_batch(1 + i % 3, value=bytes([i]) * size))
        fetch = min(fetch, plog.log_end_offset)
        copied = plog.read(fetch, max_bytes, Isolation.READ_UNCOMMITTED, min_one)
        sliced = plog.read(fetch, max_bytes, Isolation.READ_UNCOMMITTED, min_one, zero_copy=True)
        assert sliced.next_offset == copied.next_offset
        if not copied.records:
            assert sliced.file_slice is None
        else:
            assert sliced.file_slice is not None
            assert len(sliced.records) == 0
            assert sliced.file_slice.read() == bytes(copied.records)
            sliced.file_slice.close()
        plog.close()


def test_a_file_slice_keeps_its_file_after_the_segment_closes_its_descriptor(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    leader_append(plog, data_batch(3, value=b"v" * 100))
    expected = bytes(plog.read(0, 10_000).records)
    file_slice = plog.read(0, 10_000, zero_copy=True).file_slice
    assert isinstance(file_slice, FileSlice)
    plog.close()  # closes the segment's descriptor; the slice holds a duplicate
    assert len(file_slice) == len(expected)
    assert file_slice.read() == expected
    file_slice.close()
    assert file_slice.fd == -1


def test_past_the_open_slices_cap_a_zero_copy_read_copies(tmp_path: Path) -> None:
    """Each open slice holds a duplicated descriptor the open-file budget does not count: past MAX_OPEN
    (a Fetch of many partitions), the read copies the bytes instead, and slices again once some close."""
    plog = open_log(tmp_path / "t-0")
    leader_append(plog, data_batch(2, value=b"w" * 50))
    expected = bytes(plog.read(0, 10_000).records)
    held = []
    while FileSlice.open_count < MAX_OPEN:
        got = plog.read(0, 10_000, zero_copy=True).file_slice
        assert got is not None
        held.append(got)
    copied = plog.read(0, 10_000, zero_copy=True)
    assert copied.file_slice is None
    assert bytes(copied.records) == expected
    held.pop().close()
    again = plog.read(0, 10_000, zero_copy=True).file_slice
    assert again is not None
    assert again.read() == expected
    for file_slice in [*held, again]:
        file_slice.close()
    assert FileSlice.open_count == 0
    plog.close()
