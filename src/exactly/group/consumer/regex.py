"""Regular-expression subscriptions of KIP-848 members (`SubscribedTopicRegex`), resolved by the
coordinator, never by the client.

Kafka compiles them with RE2/J (`com.google.re2j.Pattern`), so RE2 syntax it is: no look-around, no
back-references. exactly uses Google's RE2 itself (the `google-re2` bindings), which accepts the same
syntax; a pattern RE2 rejects answers INVALID_REGULAR_EXPRESSION. A topic matches when the whole name
matches (Java's `Matcher.matches`). Internal topics (`__consumer_offsets`, `__transaction_state`, any
name starting with ``__``) never match.

Kafka resolves regexes asynchronously and stores the result (record type 16); exactly resolves them
against the broker's topics at each heartbeat of the group, which also notices new topics at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

import re2

__all__ = ["InvalidRegex", "compile_regex", "resolve"]


class InvalidRegex(ValueError):
    """The pattern is not valid RE2."""


@lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> re2._Regexp:
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as e:
        detail = e.args[0].decode(errors="replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise InvalidRegex(detail) from None


def resolve(pattern: str, topics: Iterable[str]) -> frozenset[str]:
    """The topics whose whole name matches `pattern` (internal topics never do)."""
    compiled = compile_regex(pattern)
    return frozenset(t for t in topics if not t.startswith("__") and compiled.fullmatch(t) is not None)
