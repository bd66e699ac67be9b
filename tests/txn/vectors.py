"""The seeds' transaction state table (shared/vectors/txn-state-transitions.json) plus exactly's two-phase
commit extension (docs/two-phase-commit.md), which the seeds predate: the state Prepared (id 100, never a
stored status byte) and its rows; and Kafka 4's transaction version 2 rows (an empty abort)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SEEDS: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[3] / "shared" / "vectors" / "txn-state-transitions.json").read_text()
)

EXTENSION_STATES = {"Prepared": 100}
# target -> extra legal previous states
EXTENSION_PREVIOUS = {
    "Prepared": ["Ongoing"],
    "PrepareCommit": ["Prepared"],
    # Kafka 4's TransactionState: transaction version 2 aborts a transaction that added nothing
    "PrepareAbort": ["Prepared", "Empty", "CompleteCommit", "CompleteAbort"],
}


def _vectors() -> dict[str, Any]:
    out = json.loads(json.dumps(SEEDS))
    out["states"] = {**out["states"], **EXTENSION_STATES}
    legal = out["legal_previous_states"]
    for target, previous in EXTENSION_PREVIOUS.items():
        legal[target] = sorted({*legal.get(target, []), *previous})
    return out


VECTORS = _vectors()
