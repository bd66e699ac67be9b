"""The checker on hand-made histories: a clean one has no anomaly, and each anomaly class is found, alone,
in a history made to contain it (a checker that cannot fail proves nothing)."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from exactly.verify.checker import ANOMALY_CLASSES, check
from exactly.verify.history import Op, OpType, Poll, Send, encode_micro_ops


class H:
    """A history under construction: ops get increasing times; final scans are derived at the end."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.t = itertools.count(1000, 10)
        self.ids = itertools.count(1)
        self.frc: dict[str, list[tuple[int, int]]] = {}
        self.fru: dict[str, list[tuple[int, int]]] = {}

    def op(self, f: str, type: OpType, value: Any = None, proc: str = "w-0", inc: int = 0, **kw: Any) -> Op:
        i = next(self.ids)
        inv = Op(i, proc, inc, OpType.INVOKE, f, next(self.t), value, **kw)
        done = Op(i, proc, inc, type, f, next(self.t), value, **kw)
        self.ops += [inv, done]
        return done

    def append(self, key: str, value: int, committed: bool) -> int:
        offset = len(self.fru.setdefault(key, []))
        self.fru[key].append((offset, value))
        if committed:
            self.frc.setdefault(key, []).append((offset, value))
        return offset

    def txn(
        self,
        sends: list[tuple[str, int]],
        type: OpType = OpType.OK,
        polls: dict[str, Any] | None = None,
        proc: str = "w-0",
        inc: int = 0,
        visible: bool | None = None,
        **kw: Any,
    ) -> Op:
        shown = type is OpType.OK if visible is None else visible
        micro: list[Send | Poll] = [Send(k, v, self.append(k, v, shown)) for k, v in sends]
        if polls:
            micro.append(Poll(polls))
        return self.op("txn", type, encode_micro_ops(micro), proc=proc, inc=inc, txid=f"txn-{proc}", **kw)

    def finish(self) -> list[Op]:
        for key in self.fru:
            self.frc.setdefault(key, [])
        self.op("heal", OpType.OK, proc="runner")
        self.op("final-rc", OpType.OK, encode_micro_ops([Poll(self.frc)]), proc="runner")
        self.op("final-ru", OpType.OK, encode_micro_ops([Poll(self.fru)]), proc="runner")
        return self.ops


def found(ops: list[Op]) -> dict[str, int]:
    return {k: v for k, v in check(ops).anomalies.items() if v}


def clean() -> H:
    h = H()
    h.txn([("q0:0", 1), ("q0:1", 2)])
    h.txn([("q0:0", 3)], OpType.FAIL, extra={"intentional": True})
    h.txn([("q0:1", 4)], polls={"q0:0": [[0, 1]]}, proc="w-1")
    h.op("send", OpType.OK, encode_micro_ops([Send("idem:0", 5, h.append("idem:0", 5, True))]), proc="idem-0")
    return h


def test_a_clean_history_has_no_anomaly() -> None:
    report = check(clean().finish())
    assert report.ok, report.anomalies
    assert set(report.anomalies) == set(ANOMALY_CLASSES)
    assert report.stats["txns ok"] == 2
    assert report.stats["txns fail"] == 1


def test_lost_write_and_unseen() -> None:
    h = clean()
    op = h.txn([("q0:0", 10)])
    h.frc["q0:0"] = [r for r in h.frc["q0:0"] if r[1] != 10]
    h.fru["q0:0"] = [r for r in h.fru["q0:0"] if r[1] != 10]
    assert op.type is OpType.OK
    assert found(h.finish()) == {"lost-write": 1, "unseen": 1}


def test_aborted_read_g1a() -> None:
    h = clean()
    h.txn([("q0:0", 11)], OpType.FAIL, visible=True)
    assert found(h.finish()) == {"G1a": 1}


def test_aborted_value_read_by_a_read_committed_poll_is_g1a() -> None:
    h = clean()
    h.txn([("q0:0", 12)], OpType.FAIL)
    h.txn([], polls={"q0:0": [[4, 12]]}, proc="w-2")
    result = found(h.finish())
    assert result.get("G1a") == 1


def test_torn_transaction() -> None:
    h = clean()
    h.txn([("q0:0", 13), ("q0:1", 14)])
    h.frc["q0:1"] = [r for r in h.frc["q0:1"] if r[1] != 14]
    assert found(h.finish()) == {"torn-txn": 1, "lost-write": 1}


def test_duplicate_and_inconsistent_offsets() -> None:
    h = clean()
    h.append("q0:0", 1, True)  # value 1 a second time, at another offset
    assert found(h.finish()) == {"duplicate": 1}
    h = clean()
    h.txn([], polls={"q0:0": [[0, 99]]}, proc="w-3")  # offset 0 read with another value
    assert found(h.finish()).get("inconsistent-offsets") == 1


def test_divergence_across_a_restart_is_recovery_divergence() -> None:
    h = clean()
    h.op("restart", OpType.OK, {"seconds": 1.0}, proc="runner")
    h.frc["q0:0"][0] = (0, 77)
    h.fru["q0:0"][0] = (0, 77)
    result = found(h.finish())
    assert result.get("recovery-divergence") == 1
    assert "inconsistent-offsets" not in result


def test_power_loss_voids_unfsynced_observations_but_not_acked_writes() -> None:
    h = clean()
    h.txn([], polls={"q0:0": [[1, 3]]}, proc="w-4")  # read the (aborted, uncommitted) offset 1 ... at ru
    h.op("fault", OpType.OK, {"kind": "power-loss", "cut": {"q0:0": 1}}, proc="runner")
    h.fru["q0:0"] = [*h.fru["q0:0"][:1], (1, 50)]  # offset 1 now holds another value
    assert "inconsistent-offsets" not in found(h.finish())
    h = clean()
    h.op("fault", OpType.OK, {"kind": "power-loss", "cut": {"q0:0": 0}}, proc="runner")
    h.frc["q0:0"], h.fru["q0:0"] = [], []  # the acked value 1 is gone
    assert found(h.finish()).get("lost-write") == 1


def test_idempotence_duplicate() -> None:
    h = clean()
    h.append("idem:0", 5, True)
    assert found(h.finish()) == {"idempotence-dup": 1}


def test_an_idempotence_duplicate_across_an_epoch_bump_of_its_producer_is_reported_not_an_anomaly() -> None:
    """librdkafka re-sends what was in flight under a bumped epoch; only a bump of the same producer
    incarnation while that send was in flight explains the duplicate."""

    def history(bump_proc: str, bump_inc: int, bump_inside: bool) -> list[Op]:
        h = clean()
        value = encode_micro_ops([Send("idem:1", 7, h.append("idem:1", 7, True))])
        h.append("idem:1", 7, True)  # the re-send
        why = {"why": "Beginning partition drain for OUT_OF_ORDER_SEQUENCE_NUMBER epoch bump for 1 partition"}
        if not bump_inside:
            h.op("epoch-bump", OpType.OK, why, proc=bump_proc, inc=bump_inc)
        i = next(h.ids)
        h.ops.append(Op(i, "idem-0", 0, OpType.INVOKE, "send", next(h.t), value))
        if bump_inside:
            h.op("epoch-bump", OpType.OK, why, proc=bump_proc, inc=bump_inc)
        h.ops.append(Op(i, "idem-0", 0, OpType.OK, "send", next(h.t), value))
        return h.finish()

    report = check(history("idem-0", 0, bump_inside=True))
    assert report.ok, report.anomalies
    assert report.allowed["idempotence-dup-epoch-bump"] == 1
    assert "OUT_OF_ORDER_SEQUENCE_NUMBER" in report.examples["idempotence-dup-epoch-bump"][0]
    for proc, inc, inside in (("idem-0", 0, False), ("idem-0", 1, True), ("idem-1", 0, True)):
        report = check(history(proc, inc, inside))
        assert {k: v for k, v in report.anomalies.items() if v} == {"idempotence-dup": 1}, (proc, inc, inside)
        assert report.allowed["idempotence-dup-epoch-bump"] == 0


def test_precommitted_read() -> None:
    h = clean()
    h.txn([("q0:0", 20)], polls={"q0:0": [[2, 20]]})
    assert found(h.finish()) == {"precommitted-read": 1}


def test_poll_skip_and_nonmonotonic_poll() -> None:
    h = H()
    for v in range(5):
        h.txn([("q0:0", 100 + v)], proc="p")
    h.txn([], polls={"q0:0": [[0, 100], [1, 101]]}, proc="r")
    h.txn([], polls={"q0:0": [[3, 103]]}, proc="r")  # skips offset 2
    h.txn([], polls={"q0:0": [[1, 101]]}, proc="r")  # goes back
    h.txn([], polls={"q0:0": [[2, 102], [4, 104]]}, proc="s")  # skips inside one poll
    assert found(h.finish()) == {"poll-skip": 1, "nonmonotonic-poll": 1, "int-poll-skip": 1}


def test_nonmonotonic_send() -> None:
    h = clean()
    h.op("txn", OpType.OK, encode_micro_ops([Send("z:0", 30, 5)]), proc="m")
    h.op("txn", OpType.OK, encode_micro_ops([Send("z:0", 31, 3), Send("z:0", 32, 2)]), proc="m")
    h.frc["z:0"] = [(2, 32), (3, 31), (5, 30)]
    h.fru["z:0"] = list(h.frc["z:0"])
    assert found(h.finish()) == {"nonmonotonic-send": 1, "int-nonmonotonic-send": 1}


def test_g1c_write_read_cycle() -> None:
    h = H()
    a = [("q0:0", 40)]
    b = [("q0:1", 41)]
    h.txn(a, polls={"q0:1": [[0, 41]]}, proc="a")
    h.txn(b, polls={"q0:0": [[0, 40]]}, proc="b")
    assert found(h.finish()) == {"G1c": 1}


def test_eos_copy() -> None:
    def copier(out: list[int]) -> list[Op]:
        h = H()
        for v in (1, 2, 3):
            h.append("copy-in:0", v, True)
        h.txn([("copy-out:0", v) for v in out], extra={"input_offsets": {"copy-in:0": 3}})
        h.op("group-offsets", OpType.OK, {"copier": {"copy-in:0": 3}}, proc="runner")
        return h.finish()

    assert found(copier([1, 2, 3])) == {}
    assert found(copier([1, 2, 2, 3])) == {"eos-dup": 1, "eos-order": 1}
    assert found(copier([1, 3])) == {"eos-missing": 1, "eos-order": 1}
    assert found(copier([2, 1, 3])) == {"eos-order": 1}


def test_eos_spark_pipeline() -> None:
    """spark-out is written by the Spark sink (no sends in the history): FRC against spark-in as multisets;
    an aborted batch's copy of a value (FRU only) beside its committed copy is no duplicate."""

    def spark(out: list[tuple[int, int, bool]]) -> list[Op]:
        h = H()
        for v in (1, 2, 3):
            h.op(
                "send", OpType.OK, encode_micro_ops([Send("spark-in:0", v, h.append("spark-in:0", v, True))])
            )
        for partition, v, committed in out:
            h.append(f"spark-out:{partition}", v, committed)
        return h.finish()

    assert found(spark([(1, 2, True), (0, 1, True), (0, 3, False), (0, 3, True)])) == {}
    assert found(spark([(0, 1, True), (0, 2, True), (1, 2, True), (0, 3, True)])) == {"eos-dup": 1}
    assert found(spark([(0, 1, True), (0, 3, True), (0, 2, False)])) == {"eos-missing": 1}
    assert check(spark([(0, 1, True), (1, 2, True), (0, 3, True)])).stats["spark records out"] == 3


def test_copier_resends_after_an_abort_are_not_g1a() -> None:
    h = H()
    h.append("copy-in:0", 1, True)
    h.txn([("copy-out:0", 1)], OpType.FAIL)  # aborted at offset 0
    h.txn([("copy-out:0", 1)])  # copied again, committed at offset 1
    assert found(h.finish()) == {}


def test_offset_commit_mismatch() -> None:
    h = H()
    h.append("copy-in:0", 1, True)
    h.txn([("copy-out:0", 1)], extra={"input_offsets": {"copy-in:0": 1}})
    h.op("group-offsets", OpType.OK, {"copier": {"copy-in:0": 0}}, proc="runner")
    assert found(h.finish()) == {"offset-commit-mismatch": 1}


def test_bank_balance() -> None:
    def bank(visible_halves: int) -> list[Op]:
        h = H()
        h.txn([("bank:0", 1), ("bank:1", 2)], extra={"amounts": {"1": -5, "2": 5}})
        if visible_halves == 1:
            h.frc["bank:1"] = []
        return h.finish()

    assert found(bank(2)) == {}
    result = found(bank(1))
    assert result.get("bank-imbalance") == 1


def test_bank_snapshot_imbalance() -> None:
    h = H()
    h.txn([("bank:0", 1), ("bank:1", 2)], extra={"amounts": {"1": -5, "2": 5}})
    h.op("bank-snapshot", OpType.OK, encode_micro_ops([Poll({"bank:0": [(0, 1)], "bank:1": []})]), proc="b")
    assert found(h.finish()) == {"bank-imbalance": 1}


def test_zombie_write() -> None:
    h = clean()
    h.op("fence", OpType.OK, {"txid": "txn-z"}, proc="z", inc=1, txid="txn-z")
    h.txn([("q0:0", 60)], proc="z", inc=0)  # the old incarnation committed after the fence
    assert found(h.finish()) == {"zombie-write": 1}
    h = clean()
    h.txn([("q0:0", 61)], proc="z", inc=0)  # before the fence: fine
    h.op("fence", OpType.OK, {"txid": "txn-z"}, proc="z", inc=1, txid="txn-z")
    assert found(h.finish()) == {}


def test_hanging_transactions() -> None:
    h = clean()
    ops = h.finish()
    h.op("open-txns", OpType.OK, ["txn-x"], proc="runner")
    h.op("offsets", OpType.OK, {"q0:0": [0, 1, 3]}, proc="runner")
    assert found(ops) == {"hanging-txn": 2}


def test_lso_hwm_regression() -> None:
    h = clean()
    h.op("offsets", OpType.OK, {"q0:0": [0, 3, 4]}, proc="runner")
    h.op("offsets", OpType.OK, {"q0:0": [0, 3, 2]}, proc="runner")  # HWM went down, and LSO > HWM
    assert found(h.finish()) == {"lso-hwm-regression": 2}
    h = clean()
    h.op("offsets", OpType.OK, {"q0:0": [0, 3, 4]}, proc="runner")
    h.op("fault", OpType.OK, {"kind": "power-loss", "cut": {"q0:0": 2}}, proc="runner")
    h.op("offsets", OpType.OK, {"q0:0": [0, 2, 2]}, proc="runner")  # explained by the cut
    assert "lso-hwm-regression" not in found(h.finish())


def test_bad_input_mismatch() -> None:
    h = clean()
    h.op(
        "bad-input",
        OpType.OK,
        {"case": "crc", "expected": "CORRUPT_MESSAGE", "actual": "CORRUPT_MESSAGE"},
        proc="f",
    )
    h.op("bad-input", OpType.OK, {"case": "len", "expected": "closed", "actual": "NONE"}, proc="f")
    assert found(h.finish()) == {"bad-input-mismatch": 1}


def test_an_unfinished_transaction_is_info_and_resolved_by_visibility() -> None:
    h = clean()
    h.ops.append(Op(999, "k", 0, OpType.INVOKE, "txn", next(h.t), encode_micro_ops([Send("q0:0", 70, None)])))
    h.append("q0:0", 70, True)
    report = check(h.finish())
    assert report.ok
    assert report.allowed["info-committed"] == 1


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.lists(st.integers(0, 3), min_size=1, max_size=3)), min_size=1, max_size=25
    ),
    st.data(),
)
def test_generated_histories_are_clean_and_mutations_are_found(
    txns: list[tuple[bool, list[int]]], data: st.DataObject
) -> None:
    h = H()
    values = itertools.count(1)
    committed: list[tuple[str, int]] = []
    aborted: list[tuple[str, int]] = []
    for ok, keys in txns:
        sends = [(f"q0:{k}", next(values)) for k in keys]
        h.txn(sends, OpType.OK if ok else OpType.FAIL)
        (committed if ok else aborted).extend(sends)
    assert found(h.finish()) == {}
    mutation = data.draw(st.sampled_from(["drop", "dup", "show"]))
    if mutation == "drop" and committed:
        key, value = data.draw(st.sampled_from(committed))
        h.frc[key] = [r for r in h.frc[key] if r[1] != value]
        expected = "lost-write"
    elif mutation == "show" and aborted:
        key, value = data.draw(st.sampled_from(aborted))
        h.frc[key] = sorted(h.frc[key] + [r for r in h.fru[key] if r[1] == value])
        expected = "G1a"
    elif committed:
        key, value = data.draw(st.sampled_from(committed))
        h.append(key, value, True)
        expected = "duplicate"
    else:
        return
    h.ops = [o for o in h.ops if o.proc != "runner"]
    assert found(h.finish()).get(expected, 0) >= 1
