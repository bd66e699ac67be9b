from __future__ import annotations

from exactly.group.timers import Timers


def test_schedule_move_cancel_and_pop() -> None:
    t = Timers()
    t.schedule("a", 10)
    t.schedule("b", 5)
    t.schedule("a", 3)  # moved earlier
    t.schedule("c", 7)
    t.cancel("c")
    assert t.next_deadline() == 3
    assert t.pop_due(2) is None
    assert t.due(6) == ["a", "b"]
    assert t.next_deadline() is None
    assert len(t) == 0
    for i in range(1000):
        t.schedule("x", i)  # lazy deletion stays bounded
    assert len(t._heap) < 200
    assert t.deadline("x") == 999
    assert t.pop_due(999) == "x"
