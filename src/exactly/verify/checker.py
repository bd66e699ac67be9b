"""The checker: every invariant of verification.md §5.6 over a run's history, each with its own count.

Notation: `FRC[k]` / `FRU[k]` are the final scans of key k at read_committed / read_uncommitted (offset ->
value); a transaction's writes are its `send` micro-ops. A write is *visible* when FRC holds it: by value, or,
for `copy-out` and `spark-out` (a pipeline re-sends the same input values after an abort, so their values are
not unique per send), by the offset its send was acknowledged at.

| class                  | counts                                                                        |
|------------------------|-------------------------------------------------------------------------------|
| inconsistent-offsets   | (key, offset) pairs observed with two different values                       |
| recovery-divergence    | ... of which the two observations straddle a broker restart                  |
| duplicate              | values at two offsets of one key (FRU, polls, acks); copy-out: see eos-dup    |
| idempotence-dup        | ... of which the value came from an idempotent (non-transactional) producer  |
|                        | (allowed, reported as idempotence-dup-epoch-bump: when that producer began an |
|                        | epoch bump while the send was in flight — librdkafka re-sends what was in     |
|                        | flight under the new epoch, and a broker deduplicates within an epoch only)   |
| lost-write             | writes of `ok` transactions / acked sends missing from FRC                    |
| unseen                 | acked writes missing from FRU                                                 |
| G1a                    | writes of `fail` transactions visible in FRC or in a read_committed poll      |
| torn-txn               | transactions with some but not all writes visible                             |
| precommitted-read      | transactions that read their own writes                                       |
| poll-skip              | consecutive polls of one consumer (one process incarnation, one key) that    |
|                        | skip offsets FRC holds between them                                          |
| nonmonotonic-poll      | ... that go backwards                                                         |
| int-poll-skip, int-nonmonotonic-poll | the same inside one poll                                        |
| nonmonotonic-send      | acks of one producer incarnation on one key whose offsets go backwards        |
| int-nonmonotonic-send  | ... inside one transaction                                                    |
| G1c                    | cycles of write-read dependencies between committed transactions             |
| eos-dup, eos-missing   | copy-out vs copy-in (and spark-out vs spark-in) in FRC as multisets (values   |
|                        | copied unchanged)                                                             |
| eos-order              | copy-out:p not in copy-in:p's order (Spark tasks may interleave: not checked) |
| bank-imbalance         | FRC of `bank` or a `bank-snapshot` whose amounts do not sum to 0, or that     |
|                        | holds one half of a transfer                                                  |
| offset-commit-mismatch | the copiers' committed offsets below what an `ok` copier transaction committed|
| zombie-write           | transactions of a fenced incarnation invoked after the fence that committed  |
|                        | or have a visible write                                                       |
| hanging-txn            | open transactions after the final phase, or LSO != HWM in the last sample    |
| lso-hwm-regression     | a sampled log start / LSO / HWM that went down (not explained by a power-loss |
|                        | cut), or log start <= LSO <= HWM broken                                       |
| bad-input-mismatch     | `bad-input` cases whose answer was not the expected one                       |

A `power-loss` fault with `cut` {key: surviving log end} makes observations at offsets >= cut[key] made before
it void (never fsynced, legitimately replaced); an acknowledged write there still counts as lost.
Transactions with no completion (`info`) count as committed when any write is visible.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from exactly.verify.history import Op, OpType, complete_ops, history_files, read_history

ANOMALY_CLASSES = (
    "inconsistent-offsets",
    "recovery-divergence",
    "duplicate",
    "idempotence-dup",
    "lost-write",
    "unseen",
    "G1a",
    "torn-txn",
    "precommitted-read",
    "poll-skip",
    "nonmonotonic-poll",
    "int-poll-skip",
    "int-nonmonotonic-poll",
    "nonmonotonic-send",
    "int-nonmonotonic-send",
    "G1c",
    "eos-dup",
    "eos-missing",
    "eos-order",
    "bank-imbalance",
    "offset-commit-mismatch",
    "zombie-write",
    "hanging-txn",
    "lso-hwm-regression",
    "bad-input-mismatch",
)
ALLOWED_CLASSES = (
    "G0",
    "int-send-skip",
    "info-committed",
    "info-not-committed",
    "idempotence-dup-epoch-bump",
)
COPY_OUT = "copy-out"
#: exactly-once pipelines: (input topic, output topic, name, per-partition order kept); their outputs repeat
#: input values (a retried batch re-sends them), so their values are not unique per offset
PIPELINES = (("copy-in", COPY_OUT, "copier", True), ("spark-in", "spark-out", "spark", False))
PIPELINE_OUTPUTS = frozenset(p[1] for p in PIPELINES)
MAX_EXAMPLES = 5


@dataclass(frozen=True, slots=True)
class CheckReport:
    anomalies: dict[str, int]
    allowed: dict[str, int]
    examples: dict[str, list[str]]
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.anomalies.values())


class _Findings:
    def __init__(self) -> None:
        self.counts: dict[str, int] = dict.fromkeys(ANOMALY_CLASSES, 0)
        self.allowed: dict[str, int] = dict.fromkeys(ALLOWED_CLASSES, 0)
        self.examples: dict[str, list[str]] = defaultdict(list)

    def add(self, cls: str, example: str, n: int = 1) -> None:
        target = self.counts if cls in self.counts else self.allowed
        target[cls] += n
        if len(self.examples[cls]) < MAX_EXAMPLES:
            self.examples[cls].append(example)


def _topic(key: str) -> str:
    return key.rpartition(":")[0]


def _desc(op: Op) -> str:
    return f"{op.proc}.{op.inc}#{op.id} ({op.type.value})"


class _Voids:
    """Observations voided by power-loss cuts: (key, offset) made before a cut at or below offset."""

    def __init__(self, ops: Sequence[Op]) -> None:
        self.cuts: list[tuple[int, dict[str, int]]] = [
            (op.t, op.value["cut"])
            for op in ops
            if op.f == "fault"
            and isinstance(op.value, dict)
            and op.value.get("kind") == "power-loss"
            and "cut" in op.value
        ]

    def void(self, t: int, key: str, offset: int) -> bool:
        return any(t < ct and key in cut and offset >= cut[key] for ct, cut in self.cuts)


def check(ops: Sequence[Op]) -> CheckReport:
    invoked_at = {(o.proc, o.inc, o.id): o.t for o in ops if o.type is OpType.INVOKE}
    ops = list(complete_ops(ops)) if invoked_at else list(ops)
    f = _Findings()
    finals = {name: [o for o in ops if o.f == name] for name in ("final-rc", "final-ru")}
    frc: dict[str, dict[int, int]] = {}
    fru: dict[str, dict[int, int]] = {}
    for name, target in (("final-rc", frc), ("final-ru", fru)):
        if finals[name]:
            for key, records in finals[name][-1].polls()[0].records.items():
                target[key] = dict(records)
    visible_values: dict[str, set[int]] = {k: set(v.values()) for k, v in frc.items()}
    ru_values: dict[str, set[int]] = {k: set(v.values()) for k, v in fru.items()}
    voids = _Voids(ops)
    restarts = sorted(o.t for o in ops if o.f == "restart")
    txns = [o for o in ops if o.f == "txn"]
    stats: dict[str, float] = defaultdict(float)

    def visible(key: str, value: int, offset: int | None) -> bool:
        if _topic(key) in PIPELINE_OUTPUTS:
            return offset is not None and frc.get(key, {}).get(offset) == value
        return value in visible_values.get(key, set())

    # 1, 2, 17, 18: what every observation says about (key, offset) -> value
    seen: dict[tuple[str, int], tuple[int, int]] = {}  # (key, offset) -> (value, time)
    offsets_of: dict[tuple[str, int], set[int]] = defaultdict(set)  # (key, value) -> offsets
    idem_sends: dict[tuple[str, int], Op] = {}  # (key, value) -> the idempotent producer's acked send
    bumps: dict[tuple[str, int], list[Op]] = defaultdict(list)  # (proc, inc) -> its epoch-bump ops
    for op in ops:
        if op.f == "epoch-bump":
            bumps[(op.proc, op.inc)].append(op)
    diverged: set[tuple[str, int]] = set()

    def observe(key: str, offset: int, value: int, t: int, what: str) -> None:
        if voids.void(t, key, offset):
            return
        prev = seen.get((key, offset))
        if prev is None:
            seen[(key, offset)] = (value, t)
        elif prev[0] != value and (key, offset) not in diverged:
            diverged.add((key, offset))
            straddles = any(min(prev[1], t) < r < max(prev[1], t) for r in restarts)
            cls = "recovery-divergence" if straddles else "inconsistent-offsets"
            f.add(cls, f"{key}@{offset}: {prev[0]} and {value} ({what})")
        if _topic(key) not in PIPELINE_OUTPUTS:
            offsets_of[(key, value)].add(offset)

    for op in ops:
        if (
            op.f in ("txn", "send", "poll", "bank-snapshot", "final-rc", "final-ru")
            and op.type is not OpType.INVOKE
        ):
            for s in op.sends():
                if s.offset is not None and op.type is OpType.OK:
                    observe(s.key, s.offset, s.value, op.t, f"ack of {_desc(op)}")
                    if op.f == "send":
                        idem_sends[(s.key, s.value)] = op
            for p in op.polls():
                for key, records in p.records.items():
                    for offset, value in records:
                        observe(key, offset, value, op.t, f"read by {_desc(op)}")
    for (key, value), offs in offsets_of.items():
        if len(offs) > 1:
            what = f"{key}: value {value} at offsets {sorted(offs)}"
            send = idem_sends.get((key, value))
            if send is None:
                f.add("duplicate", what)
                continue
            sent = invoked_at.get((send.proc, send.inc, send.id), send.t)
            bump = next((b for b in bumps[(send.proc, send.inc)] if sent <= b.t <= send.t), None)
            if bump is None:
                f.add("idempotence-dup", what)
            else:
                f.add("idempotence-dup-epoch-bump", f"{what}; sent, then {bump.value['why']}")

    # 3, 4: acknowledged writes
    for op in ops:
        if op.type is OpType.OK and op.f in ("txn", "send"):
            for s in op.sends():
                stats["writes acked"] += 1
                if frc and not visible(s.key, s.value, s.offset):
                    f.add("lost-write", f"{s.key}: {s.value}@{s.offset} of {_desc(op)}")
                if (
                    fru
                    and _topic(s.key) not in PIPELINE_OUTPUTS
                    and s.value not in ru_values.get(s.key, set())
                ):
                    f.add(
                        "unseen", f"{s.key}: {s.value} of {_desc(op)} not in the final read_uncommitted scan"
                    )

    # 5, 6, 7, 14: transactions
    rc_polled: dict[str, set[int]] = defaultdict(set)
    for op in ops:
        if op.f in ("txn", "bank-snapshot") and op.type is OpType.OK:
            for p in op.polls():
                for key, records in p.records.items():
                    rc_polled[key].update(v for _, v in records)
    fences: dict[str, list[tuple[int, int]]] = defaultdict(list)  # txid -> (time, incarnation)
    for op in ops:
        if op.f == "fence" and op.type is OpType.OK:
            fences[op.txid or op.value.get("txid")].append((op.t, op.inc))
    for op in txns:
        sends = op.sends()
        stats[f"txns {op.type.value}"] += 1
        shown = [visible(s.key, s.value, s.offset) for s in sends]
        if op.type is OpType.FAIL:
            for s, v in zip(sends, shown, strict=True):
                polled = _topic(s.key) not in PIPELINE_OUTPUTS and s.value in rc_polled.get(s.key, set())
                if v or polled:
                    f.add("G1a", f"{s.key}: {s.value} of aborted {_desc(op)} visible")
        if sends and any(shown) and not all(shown) and frc:
            f.add("torn-txn", f"{_desc(op)}: {sum(shown)} of {len(sends)} writes visible")
        if op.type is OpType.INFO and sends and frc:
            f.add("info-committed" if any(shown) else "info-not-committed", _desc(op))
        own = {(s.key, s.value) for s in sends}
        for p in op.polls():
            for key, records in p.records.items():
                if any((key, v) in own for _, v in records):
                    f.add("precommitted-read", f"{_desc(op)} read its own write on {key}")
        started = invoked_at.get((op.proc, op.inc, op.id), op.t)
        for ft, finc in fences.get(op.txid or "", []):
            if finc > op.inc and started > ft and (op.type is OpType.OK or any(shown)):
                f.add("zombie-write", f"{_desc(op)} of {op.txid} after its fence by incarnation {finc}")
                break

    _check_polls(ops, frc, f)
    _check_sends(ops, f)
    _check_g1c(txns, f)
    _check_eos(frc, f, stats)
    _check_bank(ops, frc, f)
    _check_offsets_commit(ops, f)
    _check_samples(ops, f)
    for op in ops:
        if op.f == "bad-input" and op.type is not OpType.INVOKE:
            stats["bad-input cases"] += 1
            if op.value.get("expected") != op.value.get("actual"):
                f.add("bad-input-mismatch", str(op.value))
    stats["ops"] = len(ops)
    return CheckReport(dict(f.counts), dict(f.allowed), dict(f.examples), dict(stats))


def _check_polls(ops: Sequence[Op], frc: dict[str, dict[int, int]], f: _Findings) -> None:
    """Read_committed polls of one consumer move forward through FRC without gaps (assign mode)."""
    index = {k: sorted(v) for k, v in frc.items()}
    position = {k: {o: i for i, o in enumerate(offs)} for k, offs in index.items()}
    last: dict[tuple[str, int, str], int] = {}
    for op in ops:
        if op.f != "txn" or op.type is OpType.INVOKE:
            continue
        for p in op.polls():
            for key, records in p.records.items():
                pos = position.get(key)
                if pos is None:
                    continue
                idx = [pos[o] for o, _ in records if o in pos]
                for a, b in itertools.pairwise(idx):
                    if b < a:
                        f.add("int-nonmonotonic-poll", f"{_desc(op)} {key}")
                    elif b > a + 1:
                        f.add("int-poll-skip", f"{_desc(op)} {key}: {a} -> {b}")
                if not idx:
                    continue
                k = (op.proc, op.inc, key)
                prev = last.get(k)
                if prev is not None:
                    if idx[0] <= prev:
                        f.add("nonmonotonic-poll", f"{_desc(op)} {key}: {prev} -> {idx[0]}")
                    elif idx[0] > prev + 1:
                        f.add("poll-skip", f"{_desc(op)} {key}: {prev} -> {idx[0]}")
                last[k] = idx[-1]


def _check_sends(ops: Sequence[Op], f: _Findings) -> None:
    last: dict[tuple[str, int, str], int] = {}
    for op in ops:
        if op.f not in ("txn", "send") or op.type is not OpType.OK:
            continue
        inside: dict[str, int] = {}
        for s in op.sends():
            if s.offset is None:
                continue
            if s.key in inside and s.offset <= inside[s.key]:
                f.add("int-nonmonotonic-send", f"{_desc(op)} {s.key}: {inside[s.key]} -> {s.offset}")
            inside[s.key] = s.offset
        for key, offset in inside.items():
            k = (op.proc, op.inc, key)
            if op.f == "txn" and k in last and offset <= last[k]:
                f.add("nonmonotonic-send", f"{_desc(op)} {key}: {last[k]} -> {offset}")
            last[k] = max(offset, last.get(k, -1))


def _check_g1c(txns: Sequence[Op], f: _Findings) -> None:
    """Write-read cycles between committed transactions (Tarjan's strongly connected components)."""
    writer: dict[tuple[str, int], int] = {}
    committed = [op for op in txns if op.type is OpType.OK]
    for i, op in enumerate(committed):
        for s in op.sends():
            if _topic(s.key) not in PIPELINE_OUTPUTS:
                writer[(s.key, s.value)] = i
    edges: dict[int, set[int]] = defaultdict(set)
    for i, op in enumerate(committed):
        for p in op.polls():
            for key, records in p.records.items():
                for _, v in records:
                    w = writer.get((key, v))
                    if w is not None and w != i:
                        edges[w].add(i)
    for component in _sccs(len(committed), edges):
        if len(component) > 1:
            f.add("G1c", "cycle: " + ", ".join(_desc(committed[i]) for i in component[:6]))


def _sccs(n: int, edges: dict[int, set[int]]) -> Iterable[list[int]]:
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    counter = 0
    for root in range(n):
        if root in index or root not in edges:
            continue
        work = [(root, iter(edges.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(edges.get(w, ()))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                yield component


def _check_eos(frc: dict[str, dict[int, int]], f: _Findings, stats: dict[str, float]) -> None:
    for source, sink, name, ordered in PIPELINES:
        _check_pipeline(frc, f, stats, source, sink, name, ordered)


def _check_pipeline(
    frc: dict[str, dict[int, int]],
    f: _Findings,
    stats: dict[str, float],
    source: str,
    sink: str,
    name: str,
    ordered: bool,
) -> None:
    ins = {k: [v for _, v in sorted(r.items())] for k, r in frc.items() if _topic(k) == source}
    outs = {k: [v for _, v in sorted(r.items())] for k, r in frc.items() if _topic(k) == sink}
    if not ins:
        return
    counts: dict[int, int] = defaultdict(int)
    for values in ins.values():
        for v in values:
            counts[v] += 1
    for values in outs.values():
        for v in values:
            counts[v] -= 1
    stats[f"{name} records in"] = sum(len(v) for v in ins.values())
    stats[f"{name} records out"] = sum(len(v) for v in outs.values())
    for v, c in counts.items():
        if c > 0:
            f.add("eos-missing", f"{name}: value {v} copied {c} time(s) too few")
        elif c < 0:
            f.add("eos-dup", f"{name}: value {v} copied {-c} time(s) too many")
    if not ordered:
        return
    for k, values in ins.items():
        out = outs.get(f"{sink}:{k.rpartition(':')[2]}", [])
        if out != values[: len(out)]:
            first = next(i for i, (a, b) in enumerate(zip(out, values, strict=False)) if a != b) if out else 0
            f.add("eos-order", f"{k} -> {sink}: differs from index {first}")


def _check_bank(ops: Sequence[Op], frc: dict[str, dict[int, int]], f: _Findings) -> None:
    amounts: dict[int, int] = {}
    pair: dict[int, int] = {}
    for op in ops:
        if op.f == "txn" and "amounts" in op.extra:
            vals = [int(v) for v in op.extra["amounts"]]
            for v in vals:
                amounts[v] = int(op.extra["amounts"][str(v)])
            if len(vals) == 2:
                pair[vals[0]], pair[vals[1]] = vals[1], vals[0]
    if not amounts:
        return
    snapshots: list[tuple[str, set[int]]] = []
    bank = {v for k, r in frc.items() if _topic(k) == "bank" for v in r.values()}
    if frc:
        snapshots.append(("final read_committed scan", bank))
    for op in ops:
        if op.f == "bank-snapshot" and op.type is OpType.OK:
            snapshots.append((_desc(op), {v for p in op.polls() for rs in p.records.values() for _, v in rs}))
    for name, values in snapshots:
        total = sum(amounts.get(v, 0) for v in values)
        halves = sum(1 for v in values if v in pair and pair[v] not in values)
        if total != 0 or halves:
            f.add("bank-imbalance", f"{name}: sum {total}, {halves} half transfer(s)")


def _check_offsets_commit(ops: Sequence[Op], f: _Findings) -> None:
    final = [o for o in ops if o.f == "group-offsets" and o.type is OpType.OK]
    if not final:
        return
    committed: dict[str, int] = final[-1].value.get("copier", {})
    wanted: dict[str, int] = {}
    for op in ops:
        if op.f == "txn" and op.type is OpType.OK and "input_offsets" in op.extra:
            for k, o in op.extra["input_offsets"].items():
                wanted[k] = max(wanted.get(k, 0), int(o))
    for k, o in wanted.items():
        if committed.get(k, -1) < o:
            f.add("offset-commit-mismatch", f"{k}: committed {committed.get(k)} < {o} of an ok transaction")


def _check_samples(ops: Sequence[Op], f: _Findings) -> None:
    cuts = [
        (o.t, o.value["cut"])
        for o in ops
        if o.f == "fault" and isinstance(o.value, dict) and "cut" in o.value
    ]
    last: dict[str, tuple[int, list[int]]] = {}
    samples = [o for o in ops if o.f == "offsets" and o.type is OpType.OK]
    for op in samples:
        for key, (ls, lso, hwm) in op.value.items():
            if not ls <= lso <= hwm:
                f.add("lso-hwm-regression", f"{key}: log start {ls}, LSO {lso}, HWM {hwm} at {_desc(op)}")
            prev = last.get(key)
            if prev is not None:
                t0, (pls, plso, phwm) = prev
                cut = min((c[key] for ct, c in cuts if t0 < ct <= op.t and key in c), default=None)
                floor_hwm = phwm if cut is None else min(phwm, cut)
                floor_lso = plso if cut is None else min(plso, cut)
                if hwm < floor_hwm or lso < floor_lso or ls < pls:
                    f.add("lso-hwm-regression", f"{key}: {prev[1]} -> {[ls, lso, hwm]}")
            last[key] = (op.t, [ls, lso, hwm])
    heal = max((o.t for o in ops if o.f == "heal"), default=None)
    open_txns = [o for o in ops if o.f == "open-txns" and o.type is OpType.OK]
    if open_txns and open_txns[-1].value:
        f.add("hanging-txn", f"open after the final phase: {open_txns[-1].value}", len(open_txns[-1].value))
    if heal is not None and samples and samples[-1].t > heal:
        for key, (_, lso, hwm) in samples[-1].value.items():
            if lso != hwm:
                f.add("hanging-txn", f"{key}: LSO {lso} != HWM {hwm} after the final phase")


def check_run(run_dir: Path) -> CheckReport:
    return check(read_history(history_files(run_dir)))


def format_report(report: CheckReport) -> str:
    lines = ["anomalies (all must be 0):"]
    for cls in ANOMALY_CLASSES:
        n = report.anomalies.get(cls, 0)
        lines.append(
            f"  {cls:<24} {n:>6}" + ("" if n == 0 else "   e.g. " + "; ".join(report.examples[cls][:2]))
        )
    lines.append("reported, allowed: " + ", ".join(f"{k} {v}" for k, v in report.allowed.items()))
    lines.append("result: " + ("OK" if report.ok else "ANOMALIES FOUND"))
    return "\n".join(lines)
