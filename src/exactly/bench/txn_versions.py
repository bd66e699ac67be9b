"""Transaction version 2 vs 1 (KIP-890 part 2): what one transaction costs a client, per commit.

    python -m exactly.bench.txn_versions [--commits N] [--runs K] [--partitions P]

Phase 5 of `exactly bench txn`, also runnable alone (it then starts its own broker on a fresh data
directory, default durability: fsync before every ack). One process, exactly's protocol-level
transactional producer (`exactly.client.txn`; no Python client speaks TV2), one transactional id per
version, N transactions per run after 20 unmeasured ones, each writing one 1 KiB record to each of P
partitions (default 1) and committing:

* TV1: AddPartitionsToTxn v3 per partition (first write of the transaction to it), Produce v11, EndTxn v4.
* TV2: Produce v12 (the leader adds the partition: on one broker, in process), EndTxn v5 (the epoch
  bumped at every commit).

Runs of the two alternate (TV1 first in even runs), so machine noise hits both alike. Reported, as the
median of the runs: requests per transaction (the client's round trips, counted by the client; retries
included), the whole transaction's latency (first write .. commit answered) p50/p99, and the EndTxn's
alone p50/p99 (TV2's EndTxn also records the epoch bump, so it is not expected to be cheaper; the saving is
the AddPartitionsToTxn round trip, paid inside the leader's Produce instead).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from exactly.bench.broker import RECORD_SIZE, percentile
from exactly.client.txn import TransactionalProducer
from exactly.testing.processes import BrokerProcess

__all__ = ["TOPIC", "compare", "create_topic", "main", "report"]

TOPIC = "bench-txn-versions"
_WARMUP = 20


def create_topic(bootstrap: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(30)


def _one_run(bootstrap: str, version: int, commits: int, partitions: int, tag: str) -> dict[str, Any]:
    value = b"x" * RECORD_SIZE
    whole: list[float] = []
    end_txn: list[float] = []
    trips: list[int] = []
    with TransactionalProducer(bootstrap, f"bench-tv{version}-{tag}", transaction_version=version) as p:
        p.init()
        for i in range(_WARMUP + commits):
            before = p.round_trips
            start = time.perf_counter()
            for partition in range(partitions):
                p.send(TOPIC, partition, [value])
            ending = time.perf_counter()
            p.commit()
            done = time.perf_counter()
            if i >= _WARMUP:
                whole.append(done - start)
                end_txn.append(done - ending)
                trips.append(p.round_trips - before)
    return {"whole": whole, "end_txn": end_txn, "round_trips": statistics.mean(trips)}


def compare(bootstrap: str, commits: int, runs: int, partitions: int = 1) -> dict[str, Any]:
    """TV1 vs TV2 on a running broker whose `TOPIC` has at least `partitions` partitions."""
    samples: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for run in range(runs):
        for version in (1, 2) if run % 2 == 0 else (2, 1):
            samples[version].append(_one_run(bootstrap, version, commits, partitions, str(run)))
    out: dict[str, Any] = {}
    for version, results in samples.items():
        key = f"tv{version}"
        out[f"{key}_round_trips_per_commit"] = float(statistics.median(r["round_trips"] for r in results))
        for name in ("whole", "end_txn"):
            out[f"{key}_{name}_p50_ms"] = float(
                statistics.median(percentile(r[name], 0.5) * 1e3 for r in results)
            )
            out[f"{key}_{name}_p99_ms"] = float(
                statistics.median(percentile(r[name], 0.99) * 1e3 for r in results)
            )
    out["tv2_over_tv1_whole_p50"] = out["tv2_whole_p50_ms"] / out["tv1_whole_p50_ms"]
    return out


def report(figures: dict[str, Any], commits: int, runs: int, partitions: int, heading: str = "") -> None:
    print(
        f"\n{heading}transaction version 2 vs 1, protocol-level client, {commits} transactions per run "
        f"of one {RECORD_SIZE} B record to each of {partitions} partition(s), {runs} runs (median of runs)"
    )
    print(f"   {'':<6}{'requests/txn':>14}{'txn p50':>10}{'txn p99':>10}{'EndTxn p50':>12}{'EndTxn p99':>12}")
    for version in (1, 2):
        k = f"tv{version}"
        trips = figures[f"{k}_round_trips_per_commit"]
        print(
            f"   TV{version:<4}{trips:14.2f}{figures[f'{k}_whole_p50_ms']:10.2f}"
            f"{figures[f'{k}_whole_p99_ms']:10.2f}{figures[f'{k}_end_txn_p50_ms']:12.2f}"
            f"{figures[f'{k}_end_txn_p99_ms']:12.2f}"
        )
    print(f"   TV2 / TV1 whole-transaction p50: {figures['tv2_over_tv1_whole_p50']:.3f}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description="transaction version 2 vs 1")
    parser.add_argument("--commits", type=int, default=300, help="transactions per run")
    parser.add_argument("--runs", type=int, default=3, help="runs of each version (alternating)")
    parser.add_argument("--partitions", type=int, default=1, help="partitions written per transaction")
    args = parser.parse_args(argv)
    from exactly.bench.txn import start_broker

    with tempfile.TemporaryDirectory(prefix="exactly-bench-tv-") as tmp:
        broker: BrokerProcess = start_broker(Path(tmp))
        try:
            create_topic(broker.bootstrap, max(args.partitions, 1))
            figures = compare(broker.bootstrap, args.commits, args.runs, args.partitions)
        finally:
            broker.stop()
    report(figures, args.commits, args.runs, args.partitions)
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
