"""Seed 000 section 8.2: the abortTxns table, reproduced through a real log and a read_committed fetch.

/work/shared/vectors/aborted-filtering.json assigns a producer to each offset 100..115 and lists, per
case, the aborted (producer, first, last) ranges and the offsets a read_committed consumer must see.
Here each case becomes a log: the records in that order, a marker after each transaction (producer 11
has two transactions, 103-106 and 110-112), ABORT for the listed ranges and COMMIT for the rest. A
read_committed fetch returns batches plus aborted transactions; the consumer-side filter is Kafka's
(`CompletedFetch.nextFetchedRecord`): a producer is skipped from its aborted first offset until its
ABORT marker.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from exactly.records import ControlRecordType, EndTxnMarker
from exactly.storage.log import PartitionLog
from exactly.storage.txn_index import AbortedTxn, is_aborted
from tests.storage.helpers import leader_append, leader_append_marker

from .helpers import consume_committed, data_batch, open_log

VECTORS = json.loads(
    (Path(__file__).resolve().parents[3] / "shared" / "vectors" / "aborted-filtering.json").read_text()
)
OWNER: dict[int, int | None] = {int(k): v for k, v in VECTORS["offsets"].items()}
# Transactions as (producer, first vector offset, last vector offset).
TXNS = [(10, 101, 115), (11, 103, 106), (12, 104, 111), (11, 110, 112)]


def build(tmp_path: Path, aborted: list[list[int]]) -> tuple[PartitionLog, dict[int, int]]:
    plog = open_log(tmp_path / "t-0")
    seqs: dict[int, int] = {}
    vector_of: dict[int, int] = {}
    aborted_set = {tuple(a) for a in aborted}
    for v in sorted(OWNER):
        pid = OWNER[v]
        if pid is None:
            info = leader_append(plog, data_batch(1, value=str(v).encode()))
        else:
            seq = seqs.get(pid, 0)
            seqs[pid] = seq + 1
            info = leader_append(
                plog, data_batch(1, pid=pid, epoch=0, seq=seq, txn=True, value=str(v).encode())
            )
        vector_of[info.first_offset] = v
        for txn in TXNS:
            if txn[2] == v and v != 115 and txn[0] == pid and v == 106:
                kind = ControlRecordType.ABORT if txn in aborted_set else ControlRecordType.COMMIT
                leader_append_marker(plog, pid, 0, EndTxnMarker(kind, 0))
    for pid, first, last in TXNS:
        if last != 106:
            kind = ControlRecordType.ABORT if (pid, first, last) in aborted_set else ControlRecordType.COMMIT
            leader_append_marker(plog, pid, 0, EndTxnMarker(kind, 0))
    return plog, vector_of


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: str(c["aborted"]))
def test_seed_abort_table_through_the_log(tmp_path: Path, case: dict[str, Any]) -> None:
    plog, vector_of = build(tmp_path, case["aborted"])
    assert plog.last_stable_offset == plog.high_watermark
    visible = [vector_of[o] for o in consume_committed(plog)]
    assert visible == case["visible"]
    assert sorted(set(OWNER) - set(visible)) == case["filtered"]


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: str(c["aborted"]))
def test_seed_abort_table_rule(case: dict[str, Any]) -> None:
    aborted = [AbortedTxn(p, f, last, last + 1) for p, f, last in case["aborted"]]
    visible = [o for o, pid in sorted(OWNER.items()) if pid is None or not is_aborted(pid, o, aborted)]
    assert visible == case["visible"]
