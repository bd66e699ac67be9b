"""Which log dir holds each partition's current log, which partitions each topic has here, and where a new
partition goes.

Placement is Kafka's `nextLogDirs`: the online dir holding the fewest partitions (current and future logs),
the first in `log.dirs` order on a tie. The count of each dir is kept as partitions are placed and removed,
so a choice costs the number of dirs and of moves in flight, not of partitions: counting them all for each
new partition made creating 100,000 partitions quadratic (minutes instead of seconds). A topic's partitions
are kept too, so what concerns one topic (its config) does not walk every partition of the broker.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

TopicPartition = tuple[str, int]


class LogPlacement:
    """The log dir of every current log (not of future logs: the caller passes their dirs to `next_dir`)."""

    __slots__ = ("_by_topic", "_counts", "_dir_of")

    def __init__(self) -> None:
        self._dir_of: dict[TopicPartition, Path] = {}
        self._counts: Counter[Path] = Counter()
        self._by_topic: dict[str, set[int]] = {}

    def __contains__(self, tp: TopicPartition) -> bool:
        return tp in self._dir_of

    def __getitem__(self, tp: TopicPartition) -> Path:
        return self._dir_of[tp]

    def get(self, tp: TopicPartition) -> Path | None:
        return self._dir_of.get(tp)

    def place(self, tp: TopicPartition, log_dir: Path) -> None:
        """`tp`'s current log is in `log_dir` (a move replaces where it was)."""
        old = self._dir_of.get(tp)
        if old is not None:
            self._counts[old] -= 1
        self._dir_of[tp] = log_dir
        self._counts[log_dir] += 1
        self._by_topic.setdefault(tp[0], set()).add(tp[1])

    def remove(self, tp: TopicPartition) -> None:
        old = self._dir_of.pop(tp, None)
        if old is not None:
            self._counts[old] -= 1
            partitions = self._by_topic[tp[0]]
            partitions.discard(tp[1])
            if not partitions:
                del self._by_topic[tp[0]]

    def clear(self) -> None:
        self._dir_of.clear()
        self._counts.clear()
        self._by_topic.clear()

    def partitions_of(self, topic: str) -> list[int]:
        """The topic's partitions placed here, in no particular order."""
        return list(self._by_topic.get(topic, ()))

    def count(self, log_dir: Path) -> int:
        """Current logs placed in `log_dir`."""
        return self._counts[log_dir]

    def next_dir(self, online: Sequence[Path], future_dirs: Iterable[Path]) -> Path:
        """The dir of `online` with the fewest current and future logs, the first of equals. `online` is
        not empty."""
        counts = {log_dir: self._counts[log_dir] for log_dir in online}
        for parent in future_dirs:
            if parent in counts:
                counts[parent] += 1
        return min(online, key=lambda d: counts[d])  # min keeps the first of equals
