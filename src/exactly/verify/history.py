"""The history of a verification run: what every client process did and saw, one JSON object a line.

Every worker process (one incarnation of one worker) appends to its own file
`<run dir>/history/<proc>.<inc>.jsonl` (`HistoryWriter.for_process`); the checker reads them all
and orders the records by `t` (CLOCK_MONOTONIC nanoseconds, one clock for every process of the machine).

An operation is two lines with the same `proc` and `id`: an `invoke` line written (and flushed) before
the operation starts, carrying what it intends to do, and a completion line (`ok`, `fail` or `info`)
once it ended. A worker killed -9 in the middle leaves an invoke without a completion: the checker
treats it as `info` (indeterminate), as Jepsen does.

    {"id": 7, "proc": "queue-1", "inc": 2, "type": "invoke", "f": "txn", "t": 81234567890,
     "value": [["send", "q0:1", 4398046511111, null], ["poll", {}]], "txid": "queue-1"}
    {"id": 7, "proc": "queue-1", "inc": 2, "type": "ok", "f": "txn", "t": 81299999999,
     "value": [["send", "q0:1", 4398046511111, 42], ["poll", {"q0:0": [[5, 99], [6, 100]]}]],
     "txid": "queue-1", "epoch": 3}

Fields (absent means null):
* `id`: per (`proc`, `inc`) operation number; `proc`: the worker's name (`queue-1`, `copier-0`,
  `bank-2`, `zombie-0`, `idem-0`, `spark-0`, `runner`); `inc`: the worker's incarnation (a restarted
  worker keeps its `proc` and transactional.id and gets the next incarnation).
* `type`: `invoke` | `ok` (happened) | `fail` (definitely did not happen: aborted, refused) | `info`
  (may or may not have happened).
* `f`: what the operation is. Transactional work is `txn`; non-transactional produce `send`; a
  non-transactional read `poll`; `init` (init_transactions), `fence` (a new incarnation fenced
  `txid`: the value is the fencing instance's epoch, if known); the runner's `final-rc` / `final-ru`
  (final scans at read_committed / read_uncommitted, a single poll micro-op each), `offsets` (a sample of
  every partition's `[log_start, lso, hwm]`: value `{"key": [ls, lso, hwm]}`), `open-txns` (value: the
  transactional ids ListTransactions/DescribeProducers show ongoing after quiescence), `fault` (value:
  `{"kind": ..., "detail": ...}`), `restart` (value: `{"seconds": recovery seconds}`), `bad-input`
  (value: `{"case": ..., "expected": ..., "actual": ...}`).
* `value`: for `txn`, `send`, `poll`, `final-*`: a list of micro-ops:
  - `["send", key, value, offset]`: key is `"<topic>:<partition>"`, value a unique int (no two sends of a
    run use the same value), offset null until acknowledged;
  - `["poll", {key: [[offset, value], ...]}]`: records read, in the order read;
* `txid`, `epoch`: the producer's transactional.id and epoch when known.
* `error`: the error that ended a `fail` / `info` operation, as text.
* `extra`: workload-specific facts: `{"amounts": {"<value>": amount}}` for bank transfers,
  `{"isolation": "read_committed"}` for polls, `{"input_offsets": {key: next offset}}` for a copier's
  transaction (the offsets it sent to the transaction), `{"group": ...}`, `{"intentional": true}` for a
  deliberate abort, `{"workload": ...}`.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import IO, Any


class OpType(Enum):
    INVOKE = "invoke"
    OK = "ok"
    FAIL = "fail"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class Send:
    key: str
    value: int
    offset: int | None = None


@dataclass(frozen=True, slots=True)
class Poll:
    records: dict[str, list[tuple[int, int]]] = field(default_factory=dict)


MicroOp = Send | Poll


@dataclass(frozen=True, slots=True)
class Op:
    id: int
    proc: str
    inc: int
    type: OpType
    f: str
    t: int
    value: Any = None
    txid: str | None = None
    epoch: int | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def micro_ops(self) -> list[MicroOp]:
        """The value as micro-ops (for `txn`, `send`, `poll`, `final-rc`, `final-ru`)."""
        return [decode_micro_op(m) for m in self.value or []]

    def sends(self) -> list[Send]:
        return [m for m in self.micro_ops if isinstance(m, Send)]

    def polls(self) -> list[Poll]:
        return [m for m in self.micro_ops if isinstance(m, Poll)]

    def to_json(self) -> str:
        d: dict[str, Any] = {
            "id": self.id,
            "proc": self.proc,
            "inc": self.inc,
            "type": self.type.value,
            "f": self.f,
            "t": self.t,
        }
        for name in ("value", "txid", "epoch", "error"):
            v = getattr(self, name)
            if v is not None:
                d[name] = v
        if self.extra:
            d["extra"] = self.extra
        return json.dumps(d, separators=(",", ":"))

    @staticmethod
    def from_json(line: str) -> Op:
        d = json.loads(line)
        return Op(
            id=d["id"],
            proc=d["proc"],
            inc=d.get("inc", 0),
            type=OpType(d["type"]),
            f=d["f"],
            t=d["t"],
            value=d.get("value"),
            txid=d.get("txid"),
            epoch=d.get("epoch"),
            error=d.get("error"),
            extra=d.get("extra") or {},
        )


def encode_micro_ops(ops: Iterable[MicroOp]) -> list[Any]:
    out: list[Any] = []
    for m in ops:
        if isinstance(m, Send):
            out.append(["send", m.key, m.value, m.offset])
        else:
            out.append(["poll", {k: [[o, v] for o, v in rs] for k, rs in m.records.items()}])
    return out


def decode_micro_op(raw: Any) -> MicroOp:
    if raw[0] == "send":
        return Send(raw[1], raw[2], raw[3] if len(raw) > 3 else None)
    if raw[0] == "poll":
        return Poll({k: [(o, v) for o, v in rs] for k, rs in raw[1].items()})
    raise ValueError(f"unknown micro-op {raw[0]!r}")


def now_ns() -> int:
    return time.monotonic_ns()


class HistoryWriter:
    """Appends one process's operations to its JSONL file; every line is flushed as it is written, so
    that a kill -9 loses at most the line being written (a torn last line is skipped by `read_history`)."""

    def __init__(self, path: Path, proc: str, inc: int = 0) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.proc = proc
        self.inc = inc
        self._ids = itertools.count(1)
        self._file: IO[str] = path.open("a", encoding="utf-8")

    @classmethod
    def for_process(cls, run_dir: Path, proc: str, inc: int = 0) -> HistoryWriter:
        return cls(run_dir / "history" / f"{proc}.{inc}.jsonl", proc, inc)

    def invoke(self, f: str, value: Any = None, **fields: Any) -> Op:
        op = Op(next(self._ids), self.proc, self.inc, OpType.INVOKE, f, now_ns(), value, **fields)
        self._write(op)
        return op

    def complete(self, invoked: Op, type: OpType, value: Any = None, **fields: Any) -> Op:
        """The completion of `invoked`; `value` defaults to the invoked value."""
        op = replace(
            invoked,
            type=type,
            t=now_ns(),
            value=invoked.value if value is None else value,
            **fields,
        )
        self._write(op)
        return op

    def record(self, f: str, type: OpType, value: Any = None, **fields: Any) -> Op:
        """An instantaneous operation (an invoke and its completion at once): faults, samples, scans."""
        return self.complete(self.invoke(f, value, **fields), type)

    def _write(self, op: Op) -> None:
        self._file.write(op.to_json() + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_history(paths: Iterable[Path]) -> list[Op]:
    """Every operation of every file, ordered by time; a torn (unparseable) last line is skipped."""
    ops: list[Op] = []
    for path in paths:
        lines = path.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines):
            try:
                ops.append(Op.from_json(line))
            except (ValueError, KeyError, IndexError, TypeError):
                if n != len(lines) - 1:
                    raise ValueError(f"{path}:{n + 1}: not a history record: {line[:200]!r}") from None
    ops.sort(key=lambda o: o.t)
    return ops


def history_files(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "history").glob("*.jsonl"))


def complete_ops(ops: Iterable[Op]) -> Iterator[Op]:
    """One operation per invoke: its completion, or (no completion: the process died) the invoke turned
    into `info` with the invoked value."""
    pending: dict[tuple[str, int, int], Op] = {}
    done: list[Op] = []
    for op in ops:
        k = (op.proc, op.inc, op.id)
        if op.type is OpType.INVOKE:
            pending[k] = op
        else:
            pending.pop(k, None)
            done.append(op)
    done += [replace(op, type=OpType.INFO, error="no completion (process died)") for op in pending.values()]
    done.sort(key=lambda o: o.t)
    yield from done


def value_for(worker: int, counter: int) -> int:
    """A run-unique record value: the worker number in the high bits (Jepsen's scheme)."""
    return (worker << 40) | counter
