"""Points in the `exactly` writer where a test can step in (fault injection); by default nothing happens.

A hook is a `WriterHooks` subclass named by the writer option ``exactly.writer.hooks`` as
``package.module:Class`` (with ``exactly.writer.hooks.argument``, a string handed to its constructor).
Spark runs the writer in several processes — `commit` on the driver, `write` in the executors' Python
workers — so the options carry the class's name, not an instance: each process imports the class and
builds its own hooks when it needs them. The module must be importable there (the test suite's hooks are
in `exactly.testing.spark_hooks`). Without the option the writer uses `WriterHooks()`, which does nothing.

No import of pyspark here: the options are parsed, and the hooks loaded, without Spark.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

__all__ = ["HOOKS", "HOOKS_ARGUMENT", "HooksSpec", "WriterHooks", "load_hooks"]

HOOKS = "exactly.writer.hooks"
HOOKS_ARGUMENT = "exactly.writer.hooks.argument"


class WriterHooks:
    """Called by the writer at its steps; every method does nothing here. A method that raises makes the
    step fail as any error there would (a task attempt fails; the driver's commit fails)."""

    def __init__(self, argument: str | None = None) -> None:
        """`argument`: the option ``exactly.writer.hooks.argument`` (ValueError if a subclass rejects it)."""
        self.argument = argument

    def task_written(self, partition: int, attempt: int, rows: int) -> None:
        """In the executor: a task attempt delivered (and, exactly-once, prepared) its `rows` rows."""

    def before_decision(self, query_id: str, batch_id: int) -> None:
        """On the driver: the batch's transactions are prepared; the broker has decided nothing yet."""

    def after_decision(self, query_id: str, batch_id: int) -> None:
        """On the driver: the broker decided the batch; Spark has not written its commit log entry."""


@dataclass(frozen=True, slots=True)
class HooksSpec:
    """Which hooks the writer uses: an importable `WriterHooks` subclass and its argument. Picklable."""

    target: str  # "package.module:Class"
    argument: str | None = None

    def load(self) -> WriterHooks:
        """Import the class and build the hooks (ValueError if the target is not a WriterHooks class or
        the class rejects the argument)."""
        module_name, sep, class_name = self.target.partition(":")
        if not sep or not module_name or not class_name:
            raise ValueError(f"{self.target!r} is not 'package.module:Class'")
        try:
            hooks_class = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"cannot load {self.target!r}: {e}") from None
        if not (isinstance(hooks_class, type) and issubclass(hooks_class, WriterHooks)):
            raise ValueError(f"{self.target!r} is not a subclass of {WriterHooks.__qualname__}")
        hooks: WriterHooks = hooks_class(self.argument)
        return hooks


def load_hooks(spec: HooksSpec | None) -> WriterHooks:
    """The hooks `spec` names, or the ones that do nothing."""
    return WriterHooks() if spec is None else spec.load()
