"""The broker's loggers as Kafka's BROKER_LOGGER config resource (type 8) shows them: what
`kafka-configs.sh --entity-type broker-loggers` describes and changes at run time.

A logger is a Python `logging` logger of the broker process (the root logger is "root", as in Kafka),
its value its effective level in Kafka's names: OFF FATAL ERROR WARN INFO DEBUG TRACE (TRACE is below
Python's DEBUG, OFF above CRITICAL). IncrementalAlterConfigs SET gives a logger a level, DELETE makes it
inherit its parent's again; Kafka's checks and messages (`ConfigAdminManager.validateLogLevelConfigs`):
an unknown logger or level is INVALID_CONFIG, deleting the root logger's level or APPEND / SUBTRACT is
INVALID_REQUEST. Nothing is persisted: a restart starts from the configured levels, as in Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from exactly.errors import ErrorCode, KafkaError

ROOT = "root"
TRACE = 5
OFF = logging.CRITICAL + 10
LEVELS: dict[str, int] = {
    "OFF": OFF,
    "FATAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": TRACE,
}
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def level_name(level: int) -> str:
    """Kafka's name of a Python level (the nearest Kafka level at or above it)."""
    return next(name for name, value in sorted(LEVELS.items(), key=lambda x: x[1]) if value >= level)


def _logger(name: str, root: logging.Logger) -> logging.Logger | None:
    if name == ROOT:
        return root
    found = root.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else None


def loggers(root: logging.Logger = logging.root) -> dict[str, str]:
    """Every logger of the process with its effective level, root first then by name."""
    out = {ROOT: level_name(root.getEffectiveLevel())}
    for name in sorted(root.manager.loggerDict):
        found = _logger(name, root)
        if found is not None:
            out[name] = level_name(found.getEffectiveLevel())
    return out


def check(changes: Iterable[tuple[str, int, str | None]], root: logging.Logger = logging.root) -> None:
    """KafkaError for the first change (logger, operation, level) Kafka would refuse."""
    for name, op, value in changes:
        if op in (APPEND, SUBTRACT):
            verb = "APPEND" if op == APPEND else "SUBTRACT"
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"{verb} operation is not allowed for the BROKER_LOGGER resource"
            )
        if op not in (SET, DELETE):
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource",
            )
        if _logger(name, root) is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")
        if op == DELETE and name == ROOT:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Removing the log level of the {ROOT} logger is not allowed"
            )
        if op == SET and value not in LEVELS:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"Cannot set the log level of {name} to {value} as it is not a supported log level. "
                f"Valid log levels are {', '.join(LEVELS)}",
            )


def apply(changes: Iterable[tuple[str, int, str | None]], root: logging.Logger = logging.root) -> None:
    """Apply checked changes: SET a level, DELETE it (the logger inherits again)."""
    for name, op, value in changes:
        logger = _logger(name, root)
        assert logger is not None
        if op == SET and value is not None:
            logger.setLevel(LEVELS[value])
        elif op == DELETE:
            logger.setLevel(logging.NOTSET)
