"""What a coordinator operation gives back: `Result` (records to append, the response, completions of
requests parked earlier) and `Parked` (the response comes later). See `coordinator.py` for how a
driver applies a result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from exactly.group.records import CoordinatorRecord

__all__ = ["Parked", "Result"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Parked:
    """The response will come later, as a completion for `waiter`."""

    waiter: int


@dataclass(slots=True)
class Result(Generic[T]):
    """What an operation produced: records to append (then replay), the response, and completions."""

    response: T | Parked | None
    group_id: str = ""
    records: list[CoordinatorRecord] = field(default_factory=list)
    completions: list[tuple[int, Any]] = field(default_factory=list)
    # A transactional offset commit: the records are appended as one transactional batch of this producer.
    producer_id: int = -1
    producer_epoch: int = -1

    def absorb(self, other: Result[Any]) -> Result[T]:
        self.records.extend(other.records)
        self.completions.extend(other.completions)
        return self
