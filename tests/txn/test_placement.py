"""`placement_key` (which key places a transactional id in `__transaction_state`), and the package's
lazy names: the Spark sink's workers import `exactly.txn.placement` without the coordinator."""

from __future__ import annotations

import subprocess
import sys

from exactly.txn.placement import TWO_PHASE_ID_PREFIX, placement_key


def test_a_two_phase_task_id_is_placed_with_its_query() -> None:
    assert placement_key(f"{TWO_PHASE_ID_PREFIX}.q-1.3.0") == "q-1"
    assert placement_key(f"{TWO_PHASE_ID_PREFIX}.q-1") == f"{TWO_PHASE_ID_PREFIX}.q-1"  # no task part
    assert placement_key(f"{TWO_PHASE_ID_PREFIX}..3.0") == f"{TWO_PHASE_ID_PREFIX}..3.0"  # no query
    assert placement_key("payments.q-1.3.0") == "payments.q-1.3.0"
    assert placement_key("plain") == "plain"


def test_the_spark_source_imports_no_coordinator_and_the_package_names_still_resolve() -> None:
    code = (
        "import sys, exactly.spark.source\n"
        "heavy = [m for m in ('exactly.txn.coordinator', 'exactly.group') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "from exactly.txn import TransactionCoordinator, TxnState\n"
        "assert TransactionCoordinator.__module__ == 'exactly.txn.coordinator', TransactionCoordinator\n"
        "assert TxnState.__name__ == 'TxnState'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
