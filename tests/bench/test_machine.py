"""The machine's own bounds (`exactly.bench.machine`): the sustained writer's accounting, on a real file
system with an injected clock and CPU reading."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from exactly.bench.machine import MiB, SustainedWrite, sustained_write


def test_the_sustained_writer_counts_only_the_measured_seconds(tmp_path: Path) -> None:
    # Every clock read advances 0.25 s; the writer reads it twice per write (before, after the sync).
    ticks = itertools.count()

    def clock() -> float:
        return next(ticks) * 0.25

    cpu_reads = iter([10.0, 10.5])
    written = sustained_write(
        tmp_path, 1.0, 2.0, files=2, chunk=64 * 1024, clock=clock, cpu=lambda: next(cpu_reads)
    )
    # begin = 0; the loop checks the clock at 0.25, 0.75, ..., each write ends 0.25 s after its check.
    # Warm-up: the writes checked at 0.25 and 0.75 (ending in seconds 0 and 1); measured: the writes
    # checked at 1.25 .. 2.75 (ending at 1.5 .. 3.0), until the check at 3.25 ends the loop and the
    # clock reads 3.5: 2.25 s for 4 writes. The partial second 3 is left out of the windows.
    assert written.window_bytes == (64 * 1024, 2 * 64 * 1024, 2 * 64 * 1024)
    assert written.measured_bytes == 4 * 64 * 1024
    assert written.cpu_seconds == 0.5
    assert abs(written.measured_seconds - 2.25) < 1e-9
    assert abs(written.mb_s - 4 * 64 * 1024 / 2.25 / 1e6) < 1e-9
    assert list(tmp_path.iterdir()) == []  # the files are gone, as a round's topic is


def test_per_gb_of_an_empty_round_is_not_a_number() -> None:
    empty = SustainedWrite((), 0, 0.0, 0.0)
    assert math.isnan(empty.mb_s)
    assert math.isnan(empty.cpu_s_per_gb)


def test_a_real_second_of_sustained_writes_lands_on_disk(tmp_path: Path) -> None:
    written = sustained_write(tmp_path, 0.2, 1.0, files=3, chunk=MiB)
    # Whole blocks only; one whole second of windows (0.2 + 1.0 s; the partial second 1 is left out).
    assert written.measured_bytes >= MiB
    assert written.measured_bytes % MiB == 0
    assert len(written.window_bytes) == 1
    assert written.window_bytes[0] >= MiB
    assert written.window_bytes[0] % MiB == 0
    assert written.measured_seconds > 0.5
    assert written.cpu_seconds > 0
    assert written.mb_s > 0
    assert list(tmp_path.iterdir()) == []


def test_the_drop_behind_writer_leaves_only_its_window_in_the_page_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second sustained writer (`drop_behind`): its files keep at most the window plus one 2 MiB
    step cached; read by mincore before the writer deletes them."""
    from exactly.storage.drop_behind import ALIGN
    from tests.storage.helpers import resident

    seen: list[tuple[float, float]] = []
    real_unlink = Path.unlink

    def unlink(path: Path, missing_ok: bool = False) -> None:
        size = path.stat().st_size
        seen.append((resident(path, 0, size - 2 * MiB - ALIGN), resident(path, size - MiB, size)))
        real_unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    written = sustained_write(tmp_path, 0.0, 0.5, files=2, chunk=MiB, drop_behind=2 * MiB)
    assert written.measured_bytes >= 2 * (2 * MiB + ALIGN + MiB)  # both files went past the window
    assert len(seen) == 2
    assert all(behind == 0.0 and tail > 0.9 for behind, tail in seen), seen
