"""Where a transactional id's state lives: the `__transaction_state` partition is chosen by a key, the id
itself, except for the Spark sink's two-phase commit tasks, whose ids are placed with their query so that
one coordinator decides a whole micro-batch (txn/coordinator.py, spark/txn_ids.py)."""

from __future__ import annotations

#: transactional ids `<prefix>.<query id>.<rest>`: the Spark sink's tasks (placed with their query)
TWO_PHASE_ID_PREFIX = "exactly-spark"


def placement_key(key: str) -> str:
    """What places `key` in a partition: the query id of a two-phase commit task's transactional id,
    else `key` itself."""
    prefix, dot, rest = key.partition(".")
    if dot and prefix == TWO_PHASE_ID_PREFIX:
        query, dot, _ = rest.partition(".")
        if dot and query:
            return query
    return key
