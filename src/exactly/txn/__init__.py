"""The transaction coordinator (`__transaction_state`), sans-IO: see `coordinator.py` and `state.py`;
the two-phase commit extension in `two_phase.py` and `decisions.py`.

The names below load on first use (PEP 562): a light module of the package (`placement.py`, which the
Spark sink's Python workers import) does not pull in the coordinator, the group package and every
protocol message with it (a third of a second per worker)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from exactly.txn.coordinator import TransactionCoordinator
    from exactly.txn.metadata import TransactionMetadata, TxnTransit
    from exactly.txn.records import TransactionLogValue, decode_key, decode_value, encode_key, encode_value
    from exactly.txn.results import MarkerJob, TxnConfig, TxnResult
    from exactly.txn.state import IllegalTransition, TxnState

_HOMES = {
    "IllegalTransition": "exactly.txn.state",
    "MarkerJob": "exactly.txn.results",
    "TransactionCoordinator": "exactly.txn.coordinator",
    "TransactionLogValue": "exactly.txn.records",
    "TransactionMetadata": "exactly.txn.metadata",
    "TxnConfig": "exactly.txn.results",
    "TxnResult": "exactly.txn.results",
    "TxnState": "exactly.txn.state",
    "TxnTransit": "exactly.txn.metadata",
    "decode_key": "exactly.txn.records",
    "decode_value": "exactly.txn.records",
    "encode_key": "exactly.txn.records",
    "encode_value": "exactly.txn.records",
}

__all__ = [
    "IllegalTransition",
    "MarkerJob",
    "TransactionCoordinator",
    "TransactionLogValue",
    "TransactionMetadata",
    "TxnConfig",
    "TxnResult",
    "TxnState",
    "TxnTransit",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
