"""LogPlacement: the dir of every current log, each topic's partitions, and Kafka's choice of a dir for a new
partition."""

from __future__ import annotations

from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from exactly.storage.log_placement import LogPlacement

DIRS = [Path("/data/a"), Path("/data/b"), Path("/data/c")]


def test_a_new_partition_goes_to_the_dir_with_the_fewest_the_first_of_equals() -> None:
    placement = LogPlacement()
    assert placement.next_dir(DIRS, []) == DIRS[0]
    placement.place(("t", 0), DIRS[0])
    assert placement.next_dir(DIRS, []) == DIRS[1]
    placement.place(("t", 1), DIRS[1])
    placement.place(("t", 2), DIRS[2])
    assert placement.next_dir(DIRS, []) == DIRS[0]
    assert placement.next_dir(DIRS, [DIRS[0]]) == DIRS[1]  # a future log there counts too
    assert placement.next_dir(DIRS[1:], []) == DIRS[1]  # an offline dir is not a choice
    placement.remove(("t", 1))
    assert placement.next_dir(DIRS, []) == DIRS[1]
    placement.place(("t", 0), DIRS[1])  # moved: it leaves the first dir
    assert (placement.count(DIRS[0]), placement.count(DIRS[1])) == (0, 1)
    assert placement.get(("t", 0)) == DIRS[1]
    assert ("t", 1) not in placement
    assert sorted(placement.partitions_of("t")) == [0, 2]
    assert placement.partitions_of("other") == []
    placement.remove(("t", 1))  # not there: nothing changes
    placement.clear()
    assert [placement.count(d) for d in DIRS] == [0, 0, 0]
    assert placement.partitions_of("t") == []


class PlacementMachine(RuleBasedStateMachine):
    """The kept counts are always those of a full recount, and the choice is the recount's."""

    def __init__(self) -> None:
        super().__init__()
        self.placement = LogPlacement()
        self.model: dict[tuple[str, int], Path] = {}

    @rule(
        topic=st.sampled_from(["t", "u"]), partition=st.integers(0, 20), index=st.integers(0, len(DIRS) - 1)
    )
    def place(self, topic: str, partition: int, index: int) -> None:
        self.placement.place((topic, partition), DIRS[index])
        self.model[(topic, partition)] = DIRS[index]

    @rule(topic=st.sampled_from(["t", "u"]), partition=st.integers(0, 20))
    def remove(self, topic: str, partition: int) -> None:
        self.placement.remove((topic, partition))
        self.model.pop((topic, partition), None)

    @rule()
    def clear(self) -> None:
        self.placement.clear()
        self.model.clear()

    @rule(online=st.sets(st.sampled_from(DIRS), min_size=1), futures=st.lists(st.sampled_from(DIRS)))
    def next_dir(self, online: set[Path], futures: list[Path]) -> None:
        ordered = [d for d in DIRS if d in online]
        counts = {d: sum(1 for p in self.model.values() if p == d) + futures.count(d) for d in ordered}
        expected = min(ordered, key=lambda d: counts[d])
        assert self.placement.next_dir(ordered, futures) == expected

    @invariant()
    def counts_match_a_recount(self) -> None:
        for log_dir in DIRS:
            assert self.placement.count(log_dir) == sum(1 for p in self.model.values() if p == log_dir)
        for tp, log_dir in self.model.items():
            assert self.placement[tp] == log_dir
        for topic in ("t", "u"):
            expected = sorted(p for t, p in self.model if t == topic)
            assert sorted(self.placement.partitions_of(topic)) == expected


TestPlacementMachine = PlacementMachine.TestCase
TestPlacementMachine.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
