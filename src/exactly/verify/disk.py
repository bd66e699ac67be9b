"""Disk damage at restart: what the broker must survive when it starts on a data directory after a crash.

`damage` (the broker must be dead, killed -9) picks one or more of:

| kind                  | what                                                           | exercises         |
|-----------------------|----------------------------------------------------------------|-------------------|
| delete-index          | remove a segment's `.index` and `.timeindex`                   | index rebuild     |
| delete-snapshot       | remove a producer-state `.snapshot`                            | snapshot fallback |
| garble-snapshot       | overwrite a `.snapshot`'s middle with random bytes             | snapshot CRC      |
| stale-recovery-point  | rewrite `recovery-point-offset-checkpoint` with every offset 0 | full recovery     |
| delete-recovery-point | remove that checkpoint                                         | full recovery     |

It never touches the bytes of a `.log` segment: acknowledged data is fsynced there, and damaging it would be
real data loss, not a fault the broker must survive. (Cutting unfsynced tails - simulated power loss - needs
a record of what the broker fsynced, which it does not keep yet.)
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from exactly.storage import files
from exactly.storage.checkpoint import read_checkpoint, write_checkpoint

KINDS = (
    "delete-index",
    "delete-snapshot",
    "garble-snapshot",
    "stale-recovery-point",
    "delete-recovery-point",
)


@dataclass(frozen=True, slots=True)
class Damage:
    kind: str
    path: str


def damage(data_dir: Path, rng: random.Random, count: int | None = None) -> list[Damage]:
    """Apply `count` (default 1-3) random kinds of damage; returns what was done (kinds with nothing to
    damage are skipped)."""
    done: list[Damage] = []
    for kind in rng.sample(KINDS, count if count is not None else rng.randint(1, 3)):
        hit = _apply(kind, data_dir, rng)
        if hit is not None:
            done.append(Damage(kind, str(hit.relative_to(data_dir))))
    return done


def _apply(kind: str, data_dir: Path, rng: random.Random) -> Path | None:
    if kind == "delete-index":
        indexes = sorted(data_dir.glob(f"*/*{files.INDEX_SUFFIX}"))
        if not indexes:
            return None
        index = rng.choice(indexes)
        index.unlink()
        index.with_suffix(files.TIME_INDEX_SUFFIX).unlink(missing_ok=True)
        return index
    if kind in ("delete-snapshot", "garble-snapshot"):
        snapshots = sorted(data_dir.glob(f"*/*{files.SNAPSHOT_SUFFIX}"))
        if not snapshots:
            return None
        snapshot = rng.choice(snapshots)
        if kind == "delete-snapshot":
            snapshot.unlink()
        else:
            data = bytearray(snapshot.read_bytes())
            start = len(data) // 3
            data[start : start + 16] = rng.randbytes(len(data[start : start + 16]))
            snapshot.write_bytes(bytes(data))
        return snapshot
    checkpoint = data_dir / files.RECOVERY_POINT_CHECKPOINT
    if not checkpoint.exists():
        return None
    if kind == "stale-recovery-point":
        write_checkpoint(checkpoint, dict.fromkeys(read_checkpoint(checkpoint), 0))
    else:
        checkpoint.unlink()
    return checkpoint
