"""The short version of the exactly-once sink's soak (`exactly bench spark-soak`, issue 23): a streaming
query with fast triggers keeps a bounded number of transactional ids, producer ids and decisions on the
broker, and its output is exactly its input. Longer runs: `exactly bench spark-soak --batches 10000`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from exactly.bench.spark_soak import run_soak
from exactly.spark.txn_ids import POOL_SIZE
from exactly.testing.processes import BrokerProcess

pytestmark = [pytest.mark.interop, pytest.mark.slow]

BROKER_SETTINGS = ["transaction.two.phase.decisions.retained.batches=5"]
TASKS = 2
BATCHES = 20


def test_a_streaming_query_keeps_the_broker_bounded(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    result = run_soak(
        spark,
        broker,
        batches=BATCHES,
        rows=10,
        partitions=4,
        tasks=TASKS,
        trigger_ms=50,
        sample_every=10,
        checkpoint=tmp_path / "checkpoint",
        timeout=300,
    )
    assert result.exact
    assert result.batches >= BATCHES
    last = result.samples[-1]
    # per (query, Spark partition) a pool of POOL_SIZE ids; in a calm run one per batch parity
    assert 0 < last.transactional_ids <= TASKS * POOL_SIZE
    assert last.max_producer_ids <= TASKS * POOL_SIZE
    assert last.decisions <= 5 + 1
    assert max(s.transactional_ids for s in result.samples) <= TASKS * POOL_SIZE
