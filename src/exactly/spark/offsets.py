"""Partition offsets of the Spark source: Spark's Kafka JSON form, admission control, input ranges.

Pure values and arithmetic (no client, no Spark import), shared by the driver and the executors.

Offset JSON (the form Spark's Kafka source stores in `checkpoint/offsets/<batch>`, and the form the user
writes in `startingOffsets` / `endingOffsets`)::

    {"<topic>": {"<partition>": <offset>, ...}, ...}

Topics and partitions are sorted (Spark compares offsets as JSON strings, so the text must be
deterministic); a partition's offset is the next offset to read. In user options `-2` means earliest and
`-1` latest; in stored offsets every value is a concrete offset.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

EARLIEST = -2
LATEST = -1


class OffsetJsonError(ValueError):
    """A malformed offsets JSON document; the message is one line."""


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


PartitionOffsets = dict[TopicPartition, int]


def parse_offsets_json(text: str, *, option: str) -> PartitionOffsets:
    """`{"t":{"0":23,"1":-2}}` -> {TopicPartition("t",0): 23, ...}; raises OffsetJsonError naming `option`."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OffsetJsonError(
            f"{option}: not valid JSON ({exc.msg} at column {exc.colno}): {text!r}"
        ) from None
    expected = '{"topic": {"0": 23, "1": -2}}'
    if not isinstance(document, dict):
        raise OffsetJsonError(f"{option}: expected a JSON object like {expected}, got {text!r}")
    offsets: PartitionOffsets = {}
    for topic, partitions in document.items():
        if not isinstance(partitions, dict):
            raise OffsetJsonError(
                f"{option}: topic {topic!r} must map partitions to offsets, like {expected}"
            )
        for partition, offset in partitions.items():
            try:
                number = int(partition)
            except ValueError:
                raise OffsetJsonError(
                    f"{option}: partition {partition!r} of topic {topic!r} is not a number"
                ) from None
            if number < 0:
                raise OffsetJsonError(f"{option}: partition {partition!r} of topic {topic!r} is negative")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise OffsetJsonError(
                    f"{option}: offset of {topic}-{partition} must be an integer >= -2 "
                    f"(-2 earliest, -1 latest), got {offset!r}"
                )
            offsets[TopicPartition(topic, number)] = offset
    return offsets


def parse_assignment_json(text: str) -> tuple[TopicPartition, ...]:
    """`assign`: `{"topicA":[0,1],"topicB":[2,4]}` -> sorted topic-partitions."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OffsetJsonError(f"assign: not valid JSON ({exc.msg} at column {exc.colno}): {text!r}") from None
    expected = '{"topicA": [0, 1], "topicB": [2, 4]}'
    if not isinstance(document, dict) or not document:
        raise OffsetJsonError(f"assign: expected a non-empty JSON object like {expected}, got {text!r}")
    assigned: set[TopicPartition] = set()
    for topic, partitions in document.items():
        if not isinstance(partitions, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions
        ):
            raise OffsetJsonError(
                f"assign: topic {topic!r} must map to a list of partition numbers, like {expected}"
            )
        assigned.update(TopicPartition(topic, p) for p in partitions)
    return tuple(sorted(assigned))


def to_spark_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The offset dict handed to Spark: topics sorted, partitions sorted numerically (as strings)."""
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return result


def from_spark_json(document: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    """The inverse of `to_spark_json` (Spark gives offsets back as parsed JSON)."""
    return {
        TopicPartition(topic, int(partition)): int(offset)
        for topic, partitions in document.items()
        for partition, offset in partitions.items()
    }


def rate_limit(
    limit: int,
    start: Mapping[TopicPartition, int],
    target: Mapping[TopicPartition, int],
) -> PartitionOffsets:
    """End offsets admitting at most about `limit` offsets, split across partitions in proportion to
    their backlog, as Spark's KafkaMicroBatchStream.rateLimit does (a partition with a backlog never
    gets less than one offset, so small partitions are not starved). Offsets, not rows: control records
    and aborted records count too."""
    sizes = {tp: end - start[tp] for tp, end in target.items() if tp in start and end - start[tp] > 0}
    total = sum(sizes.values())
    if total < 1:
        return dict(target)
    result: PartitionOffsets = {}
    for tp, end in target.items():
        size = sizes.get(tp)
        if size is None:
            result[tp] = end
            continue
        prorate = limit * (size / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        result[tp] = min(end, start[tp] + share)
    return result


@dataclass(frozen=True, slots=True, order=True)
class OffsetRange:
    """Offsets [from_offset, until_offset) of one partition: what one Spark input partition reads."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def offset_ranges(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], min_partitions: int | None = None
) -> list[OffsetRange]:
    """One range per partition with from < until, sorted; a partition new in `end` starts at 0 (the reader
    moves such a start up to the log start offset). With `min_partitions` greater than the number of
    ranges, ranges are split in proportion to their size, as Spark's KafkaOffsetRangeCalculator does."""
    ranges = [
        OffsetRange(tp.topic, tp.partition, start.get(tp, 0), until)
        for tp, until in sorted(end.items())
        if start.get(tp, 0) < until
    ]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    split: list[OffsetRange] = []
    for r in ranges:
        parts = max(math.floor(r.size / total * min_partitions + 0.5), 1)  # Scala's math.round
        remaining, begin = r.size, r.from_offset
        for part in range(parts):
            this = remaining // (parts - part)
            remaining -= this
            finish = min(begin + this, r.until_offset)
            if finish > begin:
                split.append(OffsetRange(r.topic, r.partition, begin, finish))
            begin = finish
    return split


def describe(offsets: Iterable[tuple[TopicPartition, int]]) -> str:
    return ", ".join(f"{tp}@{offset}" for tp, offset in sorted(offsets))
