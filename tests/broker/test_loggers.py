"""The broker's loggers as Kafka's BROKER_LOGGER resource: levels described, set and deleted, Kafka's
refusals. Each test uses its own logging hierarchy, never the process's."""

from __future__ import annotations

import logging

import pytest

from exactly.broker import loggers
from exactly.errors import ErrorCode, KafkaError


@pytest.fixture
def root() -> logging.Logger:
    private = logging.RootLogger(logging.INFO)
    private.manager = logging.Manager(private)
    private.manager.getLogger("exactly.broker").setLevel(logging.WARNING)
    private.manager.getLogger("exactly.broker.fetch")
    return private


def test_levels_are_described_in_kafkas_names(root: logging.Logger) -> None:
    # "exactly" is a placeholder (no logger of its own), so it is not listed
    assert loggers.loggers(root) == {"root": "INFO", "exactly.broker": "WARN", "exactly.broker.fetch": "WARN"}
    assert [loggers.level_name(v) for v in (5, 10, 20, 30, 40, 50, 60, 1, 25)] == [
        "TRACE",
        "DEBUG",
        "INFO",
        "WARN",
        "ERROR",
        "FATAL",
        "OFF",
        "TRACE",
        "WARN",
    ]


def test_set_and_delete_change_levels_at_run_time(root: logging.Logger) -> None:
    changes = [("exactly.broker.fetch", loggers.SET, "TRACE"), ("root", loggers.SET, "ERROR")]
    loggers.check(changes, root)
    loggers.apply(changes, root)
    assert loggers.loggers(root)["exactly.broker.fetch"] == "TRACE"
    assert root.manager.loggerDict["exactly.broker.fetch"].isEnabledFor(loggers.TRACE)  # type: ignore[union-attr]
    loggers.apply([("exactly.broker.fetch", loggers.DELETE, None)], root)
    assert loggers.loggers(root) == {
        "root": "ERROR",
        "exactly.broker": "WARN",
        "exactly.broker.fetch": "WARN",
    }
    loggers.apply([("exactly.broker", loggers.SET, "OFF")], root)
    assert not root.manager.loggerDict["exactly.broker"].isEnabledFor(logging.CRITICAL)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("change", "code", "message"),
    [
        (("nope", loggers.SET, "INFO"), ErrorCode.INVALID_CONFIG, "Logger nope does not exist!"),
        (("exactly", loggers.SET, "INFO"), ErrorCode.INVALID_CONFIG, "Logger exactly does not exist!"),
        (
            ("root", loggers.SET, "debug"),
            ErrorCode.INVALID_CONFIG,
            "Cannot set the log level of root to debug as it is not a supported log level. "
            "Valid log levels are OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE",
        ),
        (
            ("root", loggers.DELETE, None),
            ErrorCode.INVALID_REQUEST,
            "Removing the log level of the root logger is not allowed",
        ),
        (
            ("root", loggers.APPEND, "INFO"),
            ErrorCode.INVALID_REQUEST,
            "APPEND operation is not allowed for the BROKER_LOGGER resource",
        ),
    ],
)
def test_kafkas_refusals(
    root: logging.Logger, change: tuple[str, int, str | None], code: ErrorCode, message: str
) -> None:
    with pytest.raises(KafkaError) as raised:
        loggers.check([("exactly.broker", loggers.SET, "DEBUG"), change], root)
    assert (raised.value.code, raised.value.message) == (code, message)
