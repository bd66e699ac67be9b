"""What one Kafka config is: its type, default, validator, documentation, synonyms; parsing a value.

Types are KIP-569's (the `ConfigType` of a DescribeConfigs v3+ entry); sources are
DescribeConfigsResponse's `ConfigSource`. A value is parsed as Kafka's `ConfigDef.parseType` does (trimmed;
a LIST is split on commas with the blanks around items removed, and an empty string is the empty list),
then checked by the config's validator. Every failure is `KafkaError(INVALID_CONFIG)` with Kafka's
message, which names the config: "Invalid value x for configuration retention.ms: Not a number of type
LONG".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum

from exactly.errors import ErrorCode, KafkaError

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
SHORT_MIN, SHORT_MAX = -(2**15), 2**15 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class ConfigType(IntEnum):
    """KIP-569 (DescribeConfigsResponse v3+ `ConfigType`)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigsResponse `ConfigSource` (v1+)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


@dataclass(frozen=True, slots=True)
class Range:
    """Kafka's `Range.atLeast` / `Range.between` (inclusive; None = unbounded)."""

    low: float | None = None
    high: float | None = None

    def check(self, value: float) -> str | None:
        if self.low is not None and (value < self.low or math.isnan(value)):
            if self.high is None:
                return f"Value must be at least {_number(self.low)}"
            return f"Value must be in range [{_number(self.low)},...,{_number(self.high)}]"
        if self.high is not None and value > self.high:
            if self.low is None:
                return f"Value must be no more than {_number(self.high)}"
            return f"Value must be in range [{_number(self.low)},...,{_number(self.high)}]"
        return None


@dataclass(frozen=True, slots=True)
class OneOf:
    """Kafka's `ValidString.in` (a STRING) or `ValidList.in` (every item of a LIST)."""

    values: tuple[str, ...]
    case_insensitive: bool = False

    def check(self, value: str) -> str | None:
        candidates = [v.lower() for v in self.values] if self.case_insensitive else self.values
        if (value.lower() if self.case_insensitive else value) not in candidates:
            return f"String must be one of: {', '.join(self.values)}"
        return None


@dataclass(frozen=True, slots=True)
class Synonym:
    """A broker config that supplies a topic config's default; its value is multiplied by `factor`."""

    name: str
    factor: int = 1


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: str | None  # Kafka's default as it is described; None: no default
    doc: str
    validator: Range | OneOf | None = None
    synonyms: tuple[Synonym, ...] = ()  # topic config: the broker configs that give its default, in order
    dynamic: bool = False  # broker config: may be changed at run time (IncrementalAlterConfigs)
    sensitive: bool = False
    per_broker: bool = False  # dynamic broker config Kafka changes on a broker id only, never the default

    def parse(self, raw: str) -> bool | int | float | str | tuple[str, ...]:
        """The typed value of `raw` (KafkaError INVALID_CONFIG naming this config when it is not valid)."""
        text = raw.strip()
        problem: str | None = None
        value: bool | int | float | str | tuple[str, ...]
        if self.type is ConfigType.BOOLEAN:
            if text.lower() not in ("true", "false"):
                raise self.invalid(raw, "Expected value to be either true or false")
            return text.lower() == "true"
        if self.type in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
            low, high = _INTEGER_BOUNDS[self.type]
            try:
                number = int(text)
            except ValueError:
                number = None
            if number is None or not low <= number <= high or not _is_java_integer(text):
                raise self.invalid(raw, f"Not a number of type {self.type.name}")
            value = number
            problem = self.validator.check(number) if isinstance(self.validator, Range) else None
        elif self.type is ConfigType.DOUBLE:
            try:
                real = float(text)
            except ValueError:
                raise self.invalid(raw, "Not a number of type DOUBLE") from None
            value = real
            problem = self.validator.check(real) if isinstance(self.validator, Range) else None
        elif self.type is ConfigType.LIST:
            items = tuple(item.strip() for item in text.split(",")) if text else ()
            value = items
            if isinstance(self.validator, OneOf):
                problem = next(filter(None, (self.validator.check(item) for item in items)), None)
        else:
            value = text
            problem = self.validator.check(text) if isinstance(self.validator, OneOf) else None
        if problem is not None:
            raise self.invalid(raw, problem)
        return value

    def canonical(self, raw: str) -> str:
        """`raw` as Kafka describes it once parsed (validated; list order kept, blanks dropped)."""
        value = self.parse(raw)
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, tuple):
            return ",".join(value)
        if isinstance(value, float):
            return repr(value)
        return str(value)

    def invalid(self, raw: str, reason: str) -> KafkaError:
        shown = "[hidden]" if self.sensitive else raw
        return KafkaError(
            ErrorCode.INVALID_CONFIG, f"Invalid value {shown} for configuration {self.name}: {reason}"
        )


_INTEGER_BOUNDS = {
    ConfigType.INT: (INT_MIN, INT_MAX),
    ConfigType.SHORT: (SHORT_MIN, SHORT_MAX),
    ConfigType.LONG: (LONG_MIN, LONG_MAX),
}


def _is_java_integer(text: str) -> bool:
    """Java's Integer/Long.parseLong: an optional sign and ASCII digits only (Python also takes '1_000')."""
    digits = text[1:] if text[:1] in "+-" else text
    return digits.isascii() and digits.isdigit()


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
