"""The Spark writer's fault injection used by the test suite: `WriterHooks` subclasses, named in the
writer's options (``exactly.writer.hooks=exactly.testing.spark_hooks:FailTaskOnce`` with
``exactly.writer.hooks.argument=1``). They live in the package so that every Spark executor, local or on a
standalone cluster, can import them."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from exactly.spark.writer_hooks import WriterHooks

__all__ = ["FailTaskOnce", "HangAfterDecision", "HangBeforeDecision", "InjectedTaskFailure"]

log = logging.getLogger("exactly.testing.spark_hooks")

HANG_SECONDS = 3600.0  # longer than any test: the test kills the driver while it waits


class InjectedTaskFailure(RuntimeError):
    """The failure `FailTaskOnce` makes a task attempt raise."""


def _integer(what: str, text: str | None) -> int:
    try:
        return int(text or "")
    except ValueError:
        raise ValueError(f"{what} must be an integer, got {text!r}") from None


class FailTaskOnce(WriterHooks):
    """Attempt 0 of the task writing partition `argument` fails after it wrote (and prepared) its rows;
    Spark retries it."""

    def __init__(self, argument: str | None = None) -> None:
        super().__init__(argument)
        self.partition = _integer("FailTaskOnce's argument (a partition)", argument)

    def task_written(self, partition: int, attempt: int, rows: int) -> None:
        if partition == self.partition and attempt == 0:
            raise InjectedTaskFailure(
                f"FailTaskOnce: partition {partition} attempt 0 fails after writing {rows} rows"
            )


class _HangAtDecision(WriterHooks):
    """At its point of the driver's commit of batch N (argument ``N:<marker file>``): write ``<query id>
    <batch id>`` to the marker file, then sleep for an hour (the test kills the driver meanwhile)."""

    point = ""

    def __init__(self, argument: str | None = None) -> None:
        super().__init__(argument)
        batch, sep, marker = (argument or "").partition(":")
        if not sep or not marker:
            raise ValueError(f"{type(self).__name__}'s argument must be '<batch id>:<marker file>'")
        self.batch_id = _integer(f"{type(self).__name__}'s batch id", batch)
        self.marker = Path(marker)

    def _hang(self, query_id: str, batch_id: int) -> None:
        if batch_id != self.batch_id:
            return
        log.warning("commit of batch %d hangs %s the decision", batch_id, self.point)
        self.marker.write_text(f"{query_id} {batch_id}\n")
        time.sleep(HANG_SECONDS)


class HangBeforeDecision(_HangAtDecision):
    point = "before"

    def before_decision(self, query_id: str, batch_id: int) -> None:
        self._hang(query_id, batch_id)


class HangAfterDecision(_HangAtDecision):
    point = "after"

    def after_decision(self, query_id: str, batch_id: int) -> None:
        self._hang(query_id, batch_id)
