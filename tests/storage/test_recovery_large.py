"""Recovery of a 1 GiB log (slow: CI runs it)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from exactly.clock import SystemClock
from exactly.records import build_batch
from exactly.storage import files
from exactly.storage.config import LogConfig
from exactly.storage.loader import load_log
from tests.storage.helpers import leader_append

MiB = 1024 * 1024


@pytest.mark.slow
def test_recover_one_gib_log(tmp_path: Path) -> None:
    config = LogConfig(max_message_bytes=2 * MiB, segment_bytes=128 * MiB)
    plog = load_log(tmp_path / "big-0", "big", 0, config, SystemClock())
    batch = build_batch([(None, os.urandom(64 * 1024))] * 16, timestamp=1_700_000_000_000)
    count = (1024 * MiB) // len(batch)
    for i in range(count):
        leader_append(plog, batch)
        if i == count - 40:
            plog.flush()
    flushed = plog.recovery_point
    leo = plog.log_end_offset
    active = plog.active_segment
    path = files.log_file(plog.directory, active.base_offset)
    tail_pos = active.flushed_size + (active.size - active.flushed_size) // 2
    plog.close_without_flush()
    with open(path, "r+b") as f:  # garble one byte in the unflushed tail
        f.seek(tail_pos + 100)
        b = f.read(1)
        f.seek(tail_pos + 100)
        f.write(bytes([b[0] ^ 0xFF]))

    start = time.perf_counter()
    again = load_log(plog.directory, "big", 0, config, SystemClock(), recovery_point=0)
    unclean = time.perf_counter() - start
    assert flushed <= again.log_end_offset < leo
    assert again.size_in_bytes > 1000 * MiB
    last = again.read(again.log_end_offset - 1, MiB)
    assert len(last.records) == len(batch)
    again.close()

    # CPU time, not wall time: the machine may be loaded; scanning 1 GiB would cost several CPU seconds.
    start = time.process_time()
    clean = load_log(plog.directory, "big", 0, config, SystemClock(), had_clean_shutdown=True)
    clean_time = time.process_time() - start
    assert clean.log_end_offset == again.log_end_offset
    assert clean_time < 1.0, clean_time
    assert unclean < 60, unclean
    clean.close_without_flush()
