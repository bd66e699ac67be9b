"""Per-data-directory offset checkpoint files (Kafka's `OffsetCheckpointFile`).

`recovery-point-offset-checkpoint` and `log-start-offset-checkpoint` share one text format::

    0                       version
    2                       number of entries
    orders 0 1042           <topic> <partition> <offset>
    orders 1 77

Written atomically (temp file, fsync, rename, fsync of the directory). A file that cannot be parsed is
treated as absent, which is safe: a missing recovery point means "recover everything" and a missing log
start offset means "the first segment's base offset".

Kafka's other checkpoint files (`CheckpointFile`) share the version and count lines and differ in their
entry lines; `write_checkpoint_lines` writes any of them (leader_epoch.py writes `leader-epoch-checkpoint`
with it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from exactly.storage.files import write_atomically

log = logging.getLogger(__name__)
VERSION = 0


def write_checkpoint_lines(path: Path, entries: Sequence[str], version: int = VERSION) -> None:
    """Write a Kafka checkpoint file atomically: the version line, the entry count, one line per entry."""
    lines = [str(version), str(len(entries)), *entries]
    write_atomically(path, ("\n".join(lines) + "\n").encode())


def write_checkpoint(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    write_checkpoint_lines(
        path, [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    )


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as e:
        log.warning("ignoring malformed checkpoint %s: %s", path, e)
        return {}
    try:
        lines = text.splitlines()
        if int(lines[0]) != VERSION:
            raise ValueError(f"unknown checkpoint version {lines[0]}")
        count = int(lines[1])
        out: dict[tuple[str, int], int] = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.rsplit(" ", 2)
            out[(topic, int(partition))] = int(offset)
        if len(out) != count:
            raise ValueError("entry count mismatch")
        return out
    except (ValueError, IndexError) as e:
        log.warning("ignoring malformed checkpoint %s: %s", path, e)
        return {}
