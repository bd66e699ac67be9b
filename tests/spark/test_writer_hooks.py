"""The writer's hooks without Spark: loading by name, the defaults, the test suite's fault injection."""

from __future__ import annotations

from pathlib import Path

import pytest

from exactly.spark.writer_hooks import HooksSpec, WriterHooks, load_hooks
from exactly.testing.spark_hooks import FailTaskOnce, HangBeforeDecision, InjectedTaskFailure


def test_no_spec_is_hooks_that_do_nothing() -> None:
    hooks = load_hooks(None)
    assert type(hooks) is WriterHooks
    hooks.task_written(0, 0, 10)
    hooks.before_decision("q", 0)
    hooks.after_decision("q", 0)


def test_a_spec_loads_its_class_with_its_argument() -> None:
    hooks = load_hooks(HooksSpec("exactly.testing.spark_hooks:FailTaskOnce", "1"))
    assert isinstance(hooks, FailTaskOnce)
    assert hooks.partition == 1


def test_fail_task_once_fails_only_attempt_zero_of_its_partition() -> None:
    hooks = FailTaskOnce("1")
    hooks.task_written(0, 0, 5)
    hooks.task_written(1, 1, 5)
    with pytest.raises(InjectedTaskFailure, match="partition 1 attempt 0 fails after writing 5 rows"):
        hooks.task_written(1, 0, 5)


def test_a_hang_hook_passes_other_batches_and_points(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    hooks = HangBeforeDecision(f"2:{marker}")
    hooks.before_decision("q", 1)  # another batch
    hooks.after_decision("q", 2)  # another point
    assert not marker.exists()
