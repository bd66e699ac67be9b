"""The transaction coordinator (`__transaction_state`), sans-IO: see `coordinator.py` and `state.py`;
the two-phase commit extension in `two_phase.py` and `decisions.py`."""

from exactly.txn.coordinator import MarkerJob, TransactionCoordinator, TxnConfig, TxnResult
from exactly.txn.metadata import TransactionMetadata, TxnTransit
from exactly.txn.records import TransactionLogValue, decode_key, decode_value, encode_key, encode_value
from exactly.txn.state import IllegalTransition, TxnState

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
