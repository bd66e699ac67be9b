"""The server-side assignors of KIP-848 consumer groups: Kafka's `uniform` and `range`.

An assignor turns the group's members (what each subscribes to, its current target assignment) and
the subscribed topics (id -> partition count, in the order to hand them out) into the next target
assignment: member id -> {topic id -> partitions}. It is a pure function; the coordinator runs it when
the group epoch moves past the target assignment epoch (`manager.py`).

* `UniformAssignor` (Kafka's `UniformAssignor`, the default). When every member subscribes to the same
  topics (the homogeneous case, Kafka's `UniformHomogeneousAssignmentBuilder`): each member gets
  ``P // M`` partitions and the first ``P % M`` members one more, so sizes differ by at most one;
  balance comes first, then stickiness: a member keeps as many of its current partitions as its quota
  allows (one extra only while extra slots are left), and what is left is dealt out round-robin over the
  members still under quota, topic by topic, partition by partition. Mixed subscriptions (the
  heterogeneous case) keep each member's still-valid partitions, hand every free partition to its
  least-loaded subscriber, then move partitions from a subscriber that holds at least two more than
  another subscriber of that topic until no such move is left.
* `RangeAssignor` (Kafka's server-side `RangeAssignor`): per topic, its subscribers in a stable order
  (static members by instance id, then the others by member id) get contiguous ranges, the first
  ``P % S`` one partition more. Members subscribed to the same co-partitioned topics therefore get the
  same partition numbers of each.

Members are visited in member-id order, so the result depends only on the input.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "Assignment",
    "Assignor",
    "MemberSpec",
    "RangeAssignor",
    "UniformAssignor",
    "builtin_assignors",
]

# topic id -> partitions
Assignment = Mapping[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What an assignor knows of one member."""

    topics: frozenset[uuid.UUID]  # the subscribed topics that exist
    instance_id: str | None = None
    rack_id: str | None = None
    assignment: Assignment = field(default_factory=dict)  # its current target


class Assignor(Protocol):
    @property
    def name(self) -> str: ...

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Sequence[tuple[uuid.UUID, int]]
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        """`topics`: (id, partition count) of every subscribed topic, in hand-out order."""
        ...


def _freeze(raw: dict[str, dict[uuid.UUID, list[int]]]) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    return {m: {t: frozenset(ps) for t, ps in a.items() if ps} for m, a in raw.items()}


class UniformAssignor:
    name = "uniform"

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Sequence[tuple[uuid.UUID, int]]
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        if not members:
            return {}
        subscriptions = {spec.topics for spec in members.values()}
        if len(subscriptions) == 1:
            return self._homogeneous(members, topics)
        return self._heterogeneous(members, topics)

    @staticmethod
    def _homogeneous(
        members: Mapping[str, MemberSpec], topics: Sequence[tuple[uuid.UUID, int]]
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        order = sorted(members)
        subscribed = next(iter(members.values())).topics
        counts = {t: n for t, n in topics if t in subscribed}
        total = sum(counts.values())
        quota, extras = divmod(total, len(order))
        out: dict[str, dict[uuid.UUID, list[int]]] = {m: {} for m in order}
        size = dict.fromkeys(order, 0)
        taken: set[tuple[uuid.UUID, int]] = set()
        # Stickiness within the quota (one extra partition while extra slots are left).
        for m in order:
            current = [
                (t, p)
                for t in sorted(members[m].assignment, key=str)
                if t in counts
                for p in sorted(members[m].assignment[t])
                if p < counts[t] and (t, p) not in taken  # a partition goes to one member only
            ]
            keep = min(len(current), quota)
            if len(current) > quota and extras > 0:
                keep += 1
                extras -= 1
            for t, p in current[:keep]:
                out[m].setdefault(t, []).append(p)
                taken.add((t, p))
            size[m] = keep
        # Extra slots still free go to the first members (in order) that have none yet.
        target = {}
        for m in order:
            if size[m] > quota:
                target[m] = quota + 1
            elif extras > 0:
                target[m] = quota + 1
                extras -= 1
            else:
                target[m] = quota
        unfilled = [m for m in order if size[m] < target[m]]
        i = 0
        for t, n in topics:
            if t not in counts:
                continue
            for p in range(n):
                if (t, p) in taken:
                    continue
                while size[unfilled[i % len(unfilled)]] >= target[unfilled[i % len(unfilled)]]:
                    i += 1
                m = unfilled[i % len(unfilled)]
                out[m].setdefault(t, []).append(p)
                size[m] += 1
                i += 1
        return _freeze(out)

    @staticmethod
    def _heterogeneous(
        members: Mapping[str, MemberSpec], topics: Sequence[tuple[uuid.UUID, int]]
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        order = sorted(members)
        counts = dict(topics)
        owner: dict[tuple[uuid.UUID, int], str] = {}
        size = dict.fromkeys(order, 0)
        for m in order:
            spec = members[m]
            for t, ps in spec.assignment.items():
                if t in spec.topics and t in counts:
                    for p in ps:
                        if p < counts[t] and (t, p) not in owner:
                            owner[(t, p)] = m
                            size[m] += 1
        subscribers = {t: [m for m in order if t in members[m].topics] for t, _ in topics}
        # Topics with the fewest subscribers first: they have the least freedom.
        for t, n in sorted(topics, key=lambda tn: len(subscribers[tn[0]])):
            candidates = subscribers[t]
            if not candidates:
                continue
            for p in range(n):
                if (t, p) not in owner:
                    m = min(candidates, key=lambda c: (size[c], order.index(c)))
                    owner[(t, p)] = m
                    size[m] += 1
        moved = True
        while moved:
            moved = False
            for (t, p), m in sorted(owner.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
                lightest = min(subscribers[t], key=lambda c: (size[c], order.index(c)))
                if size[m] - size[lightest] > 1:
                    owner[(t, p)] = lightest
                    size[m] -= 1
                    size[lightest] += 1
                    moved = True
        out: dict[str, dict[uuid.UUID, list[int]]] = {m: {} for m in order}
        for (t, p), m in sorted(owner.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            out[m].setdefault(t, []).append(p)
        return _freeze(out)


class RangeAssignor:
    name = "range"

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Sequence[tuple[uuid.UUID, int]]
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        out: dict[str, dict[uuid.UUID, list[int]]] = {m: {} for m in members}

        def rank(m: str) -> tuple[int, str]:
            instance = members[m].instance_id
            return (0, instance) if instance is not None else (1, m)

        for t, n in topics:
            subscribers = sorted((m for m in members if t in members[m].topics), key=rank)
            if not subscribers:
                continue
            quota, extras = divmod(n, len(subscribers))
            start = 0
            for i, m in enumerate(subscribers):
                length = quota + (1 if i < extras else 0)
                if length:
                    out[m][t] = list(range(start, start + length))
                start += length
        return _freeze(out)


def builtin_assignors() -> dict[str, Assignor]:
    return {a.name: a for a in (UniformAssignor(), RangeAssignor())}
