"""One client process of a verification run (confluent-kafka), recording every operation in the history.

    python -m exactly.verify.worker WORKLOAD --run-dir D --proc NAME --inc N --number K --bootstrap B
        --seed S [--txn-timeout-ms MS] [--partitions P] [--copiers C]

Workloads (verification.md §5.3; key = "<topic>:<partition>", values run-unique ints):
* `queue`: transactions of 1-4 micro-ops (send to a random key of topics q0/q1, or poll every key at
  read_committed), the consumer's positions sent to the transaction, ~10% aborted on purpose.
* `copier`: reads `copy-in` (its share of the partitions) at read_committed and copies every value unchanged
  into the same partition of `copy-out` in a transaction with the input offsets; after an abort it rewinds
  to the group's committed offsets.
* `bank`: transfers between the partitions (accounts) of `bank`: one transaction appends -x to one account
  and +x to another (amounts in the invoke's extra); also takes `bank-snapshot`s when every account's LSO
  equals its HWM.
* `zombie`: the queue workload on topic `zombie`; the runner pauses it past its transaction timeout and
  starts a new incarnation with the same transactional.id, which records a `fence` op.
* `idem`: a non-transactional idempotent producer (acks=all), one `send` op per record, ~50 a second. Its
  librdkafka `eos` debug log goes to ``<run>/logs/<proc>.<inc>.eos.log``, and every idempotent epoch bump
  it begins (KIP-360: after a message timeout or a sequence error) is an `epoch-bump` op with the reason:
  messages in flight then are re-sent under the new epoch, so the broker cannot tell a re-send of one whose
  first write had landed (see the checker's `idempotence-dup-epoch-bump`).
* `feeder`: the same into `copy-in`, the copiers' input, for the whole run; `spark-feeder` into `spark-in`.
* `spark`: the Spark exactly-once pipeline spark-in -> spark-out (`exactly.verify.spark_job`).

Outcomes follow §5.5: a transaction that failed before its commit and was aborted is `fail`; any error in
`commit_transaction` (other than a retriable one, which is retried) is `info` and the producer is closed and
re-created (never aborted after an indeterminate commit); a fatal error is `info` and re-creates the producer.
SIGTERM ends the worker after its current operation.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import logging
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactly.verify.history import HistoryWriter, Op, OpType, Poll, Send, encode_micro_ops, value_for

QUEUE_TOPICS = ("q0", "q1")
OP_TIMEOUT_S = 10.0
#: librdkafka (2.10+) re-bootstraps when every broker is down - with one broker, at every broker restart -
#: and decommissions the brokers it knew; a transactional producer whose cached group coordinator was
#: decommissioned then hangs in send_offsets_to_transaction past its timeout (confluentinc/librdkafka#5511,
#: #5456: every send_offsets user stalled 30-120 s after each broker restart in our runs). The workers turn
#: re-bootstrapping off (the one broker's address never changes); the Watchdog still catches a stuck call.
NO_REBOOTSTRAP = {"metadata.recovery.strategy": "none"}
#: a worker's exit code when it found itself stuck in the client library (the Watchdog)
EXIT_STUCK = 4
COMMIT_RETRIES = 5


def key_of(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def split_key(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition(":")
    return topic, int(partition)


@dataclass(frozen=True, slots=True)
class WorkerArgs:
    workload: str
    run_dir: Path
    proc: str
    inc: int
    number: int
    bootstrap: str
    seed: int
    txn_timeout_ms: int
    partitions: int
    copiers: int


class Stop:
    """Set by SIGTERM: the worker finishes its operation and exits."""

    requested = False

    @classmethod
    def install(cls) -> None:
        def handler(signum: int, frame: Any) -> None:
            cls.requested = True

        signal.signal(signal.SIGTERM, handler)


class Worker:
    """What every workload shares: the history, unique values, the producer's life cycle."""

    def __init__(self, args: WorkerArgs) -> None:
        self.args = args
        self.rng = random.Random(f"{args.seed}/{args.proc}/{args.inc}")
        self.history = HistoryWriter.for_process(args.run_dir, args.proc, args.inc)
        self.counter = 0
        self.txid = f"txn-{args.proc}"
        self.producer: Any = None
        #: on a fatal error (fenced): re-create the producer (False for the zombie: exit, as a fenced
        #: application instance should, instead of fencing its successor in turn)
        self.reinit_on_fatal = True
        self.watchdog = Watchdog()

    def next_value(self) -> int:
        self.counter += 1
        return value_for(self.args.number * 4096 + self.args.inc, self.counter)

    def producer_config(self, transactional: bool = True) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.args.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "request.timeout.ms": 5000,
            "message.timeout.ms": 20000,
            "socket.connection.setup.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 500,
            **NO_REBOOTSTRAP,
        }
        if transactional:
            conf["transactional.id"] = self.txid
            conf["transaction.timeout.ms"] = self.args.txn_timeout_ms
            conf["message.timeout.ms"] = self.args.txn_timeout_ms  # librdkafka: must be <= the txn timeout
        return conf

    def consumer_config(self, group: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.args.bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "socket.connection.setup.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 500,
            **NO_REBOOTSTRAP,
        }

    def init_producer(self) -> None:
        """A new transactional producer; retried until init_transactions succeeds (or SIGTERM)."""
        from confluent_kafka import KafkaException, Producer

        if self.producer is not None:
            self.close_producer()
            if not self.reinit_on_fatal:
                raise Fenced("the producer must be re-created: this instance exits")
        while not Stop.requested:
            op = self.history.invoke("init", txid=self.txid)
            producer = Producer(self.producer_config())
            try:
                with self.watchdog.call("init_transactions", OP_TIMEOUT_S):
                    producer.init_transactions(OP_TIMEOUT_S)
            except KafkaException as e:
                self.history.complete(op, OpType.FAIL, error=str(e.args[0]))
                producer.flush(0)
                time.sleep(0.2)
                continue
            self.history.complete(op, OpType.OK)
            self.producer = producer
            return

    def close_producer(self) -> None:
        if self.producer is not None:
            from confluent_kafka import KafkaException

            with contextlib.suppress(KafkaException):  # a fenced producer raises here too
                self.producer.purge()
                self.producer.flush(0)
            self.producer = None

    def transaction(self, *args: Any, **kwargs: Any) -> Op:
        try:
            return self._transaction(*args, **kwargs)
        finally:
            self.watchdog.started = None

    def _transaction(
        self,
        plan: list[str],
        send_key: Callable[[], str],
        poll: Callable[[], dict[str, list[tuple[int, int]]]],
        offsets: Callable[[], tuple[list[Any], Any] | None] = lambda: None,
        extra: dict[str, Any] | None = None,
        intentional_abort: bool = False,
        sends: list[tuple[str, int]] | None = None,
    ) -> Op:
        """One transaction: `plan` is a list of "send"/"poll" micro-ops (or `sends` gives the sends);
        `offsets()` gives (positions, group metadata) to send to the transaction."""
        from confluent_kafka import KafkaException

        micro: list[Send | Poll] = []
        if sends is not None:
            micro = [Send(k, v) for k, v in sends]
        else:
            for kind in plan:
                micro.append(Send(send_key(), self.next_value()) if kind == "send" else Poll())
        op = self.history.invoke("txn", encode_micro_ops(micro), txid=self.txid, extra=extra or {})
        self.watchdog.started = time.monotonic()
        delivered: dict[int, int] = {}
        errors: list[str] = []

        def on_delivery(index: int) -> Callable[[Any, Any], None]:
            def cb(err: Any, msg: Any) -> None:
                if err is not None:
                    errors.append(str(err))
                else:
                    delivered[index] = msg.offset()

            return cb

        done: list[Send | Poll] = []
        try:
            self.producer.begin_transaction()
            for i, m in enumerate(micro):
                if isinstance(m, Send):
                    topic, partition = split_key(m.key)
                    self.producer.produce(
                        topic,
                        value=str(m.value).encode(),
                        partition=partition,
                        headers={"proc": self.args.proc, "inc": str(self.args.inc)},
                        on_delivery=on_delivery(i),
                    )
                    done.append(m)
                else:
                    done.append(Poll(poll()))
            remaining = self.producer.flush(OP_TIMEOUT_S)
            if remaining or errors:
                raise _Abortable(errors[0] if errors else f"{remaining} records undelivered")
            done = [
                Send(m.key, m.value, delivered.get(i)) if isinstance(m, Send) else m
                for i, m in enumerate(done)
            ]
            if intentional_abort:
                self.producer.abort_transaction(OP_TIMEOUT_S)
                return self.history.complete(
                    op,
                    OpType.FAIL,
                    encode_micro_ops(done),
                    error="intentional",
                    extra={**(extra or {}), "intentional": True},
                )
            positions = offsets()
            if positions is not None:
                with self.watchdog.call("send_offsets_to_transaction", OP_TIMEOUT_S):
                    self.producer.send_offsets_to_transaction(positions[0], positions[1], OP_TIMEOUT_S)
        except (KafkaException, _Abortable) as e:
            return self._abort_after(op, done, e)
        for attempt in range(COMMIT_RETRIES):
            try:
                with self.watchdog.call("commit_transaction", OP_TIMEOUT_S):
                    self.producer.commit_transaction(OP_TIMEOUT_S)
                return self.history.complete(op, OpType.OK, encode_micro_ops(done))
            except KafkaException as e:
                err = e.args[0]
                if err.retriable() and attempt < COMMIT_RETRIES - 1:
                    continue
                completed = self.history.complete(
                    op, OpType.INFO, encode_micro_ops(done), error=f"commit: {err}"
                )
                self.init_producer()
                return completed
        raise AssertionError("unreachable")

    def _abort_after(self, op: Op, done: list[Send | Poll], e: Exception) -> Op:
        from confluent_kafka import KafkaException

        err = e.args[0] if isinstance(e, KafkaException) else None
        value = encode_micro_ops(done)
        if err is not None and err.fatal():
            completed = self.history.complete(op, OpType.INFO, value, error=f"fatal: {err}")
            self.init_producer()
            return completed
        try:
            with self.watchdog.call("abort_transaction", OP_TIMEOUT_S):
                self.producer.abort_transaction(OP_TIMEOUT_S)
        except KafkaException as abort_error:
            completed = self.history.complete(
                op, OpType.INFO, value, error=f"{e}; abort: {abort_error.args[0]}"
            )
            self.init_producer()
            return completed
        return self.history.complete(op, OpType.FAIL, value, error=str(err or e))


class Watchdog:
    """A worker stuck in the client library dumps its stacks and exits with 4; the runner starts its next
    incarnation, which fences it, as an application's liveness probe would. Stuck means: one transaction
    has run for STUCK_S seconds, or one blocking call has not returned CALL_GRACE_S seconds after its own
    timeout (librdkafka's send_offsets_to_transaction can ignore its timeout when the group coordinator
    went away: confluentinc/librdkafka#5456, #5511)."""

    STUCK_S = 120.0
    CALL_GRACE_S = 20.0

    def __init__(self) -> None:
        self.started: float | None = None
        self._call: tuple[str, float] | None = None
        threading.Thread(target=self._watch, daemon=True).start()

    @contextlib.contextmanager
    def call(self, name: str, timeout: float) -> Iterator[None]:
        self._call = (name, time.monotonic() + timeout + self.CALL_GRACE_S)
        try:
            yield
        finally:
            self._call = None

    def _watch(self) -> None:
        while True:
            time.sleep(1.0)
            now = time.monotonic()
            started, call = self.started, self._call
            if started is not None and now - started > self.STUCK_S:
                self._exit(f"stuck for {self.STUCK_S:g} s in one transaction")
            if call is not None and now > call[1]:
                self._exit(f"{call[0]} did not return {self.CALL_GRACE_S:g} s after its timeout")

    @staticmethod
    def _exit(why: str) -> None:
        sys.stderr.write(f"{why}: exiting\n")
        faulthandler.dump_traceback(all_threads=True)
        os._exit(EXIT_STUCK)


class _Abortable(Exception):
    pass


class Fenced(Exception):
    """A zombie learnt that it was fenced: it exits (code 3)."""


def _poll_records(
    consumer: Any, max_records: int = 50, timeout: float = 0.2
) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for msg in consumer.consume(num_messages=max_records, timeout=timeout):
        if msg.error() is not None:
            _log_consumer_error(f"{msg.topic()}-{msg.partition()}: {msg.error()}")
            continue
        out.setdefault(key_of(msg.topic(), msg.partition()), []).append((msg.offset(), int(msg.value())))
    return out


_CONSUMER_ERRORS_LOGGED: dict[str, float] = {}


def _log_consumer_error(text: str) -> None:
    """A consumer error event, to the worker's log (each distinct one at most every 10 s): the evidence
    when a worker stops making progress."""
    now = time.monotonic()
    if now - _CONSUMER_ERRORS_LOGGED.get(text, -10.0) >= 10.0:
        _CONSUMER_ERRORS_LOGGED[text] = now
        sys.stderr.write(f"{time.strftime('%H:%M:%S')} consumer error: {text}\n")
        sys.stderr.flush()


def _positions(consumer: Any, partitions: list[Any]) -> tuple[list[Any], Any]:
    return consumer.position(partitions), consumer.consumer_group_metadata()


def run_queue(w: Worker, topics: tuple[str, ...]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    keys = [key_of(t, p) for t in topics for p in range(w.args.partitions)]
    consumer = Consumer(w.consumer_config(f"group-{w.args.proc}"))
    partitions = [TopicPartition(*split_key(k)) for k in keys]
    consumer.assign(partitions)
    if w.producer is None:
        w.init_producer()
    while not Stop.requested and w.producer is not None:
        plan = [w.rng.choice(("send", "send", "poll")) for _ in range(w.rng.randint(1, 4))]
        w.transaction(
            plan,
            send_key=lambda: w.rng.choice(keys),
            poll=lambda: _poll_records(consumer),
            offsets=lambda: _positions(consumer, partitions),
            intentional_abort=w.rng.random() < 0.1,
        )
    consumer.close()


def run_copier(w: Worker) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    mine = [p for p in range(w.args.partitions) if p % w.args.copiers == w.args.number % w.args.copiers]
    partitions = [TopicPartition("copy-in", p) for p in mine]
    consumer = Consumer(w.consumer_config("copier"))
    consumer.assign(partitions)
    w.init_producer()

    def rewind() -> None:
        for tp in consumer.committed(partitions, OP_TIMEOUT_S):
            consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))

    idle_since = time.monotonic()
    while not Stop.requested:
        read = _poll_records(consumer, max_records=w.rng.randint(20, 200), timeout=0.5)
        if not read:
            if time.monotonic() - idle_since >= 15.0:  # evidence for a copier that makes no progress
                idle_since = time.monotonic()
                try:
                    where = consumer.position(partitions)
                    _log_consumer_error(
                        f"nothing read for 15 s; positions {[(t.partition, t.offset) for t in where]}"
                    )
                except KafkaException as e:
                    _log_consumer_error(f"nothing read for 15 s; positions unknown ({e})")
            continue
        idle_since = time.monotonic()
        sends = [(key_of("copy-out", split_key(k)[1]), v) for k, rs in sorted(read.items()) for _, v in rs]
        input_offsets = {k: rs[-1][0] + 1 for k, rs in read.items()}
        op = w.transaction(
            [],
            send_key=lambda: "",
            poll=dict,
            offsets=lambda: _positions(consumer, partitions),
            extra={
                "input_offsets": input_offsets,
                "group": "copier",
                "read": {k: [list(r) for r in rs] for k, rs in read.items()},
            },
            intentional_abort=w.rng.random() < 0.1,
            sends=sends,
        )
        while op.type is not OpType.OK and not Stop.requested:
            try:  # until it worked: reading on from the position would skip the uncopied input
                rewind()
                break
            except KafkaException:
                time.sleep(0.5)
    consumer.close()


def run_bank(w: Worker) -> None:
    keys = [key_of("bank", p) for p in range(w.args.partitions)]
    w.init_producer()
    while not Stop.requested:
        src, dst = w.rng.sample(keys, 2)
        amount = w.rng.randint(1, 100)
        v1, v2 = w.next_value(), w.next_value()
        w.transaction(
            [],
            send_key=lambda: "",
            poll=dict,
            extra={"amounts": {str(v1): -amount, str(v2): amount}},
            intentional_abort=w.rng.random() < 0.1,
            sends=[(src, v1), (dst, v2)],
        )
        if w.args.number % 2 == 0 and w.rng.random() < 0.05:
            bank_snapshot(w, keys)


def bank_snapshot(w: Worker, keys: list[str]) -> None:
    """A read of every account at a cut where no transaction is open (LSO == HWM everywhere)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    rc = Consumer(w.consumer_config(f"snap-{w.args.proc}"))
    ru = Consumer({**w.consumer_config(f"snap-{w.args.proc}"), "isolation.level": "read_uncommitted"})
    try:
        cut: dict[str, int] = {}
        for k in keys:
            topic, p = split_key(k)
            _, hwm = ru.get_watermark_offsets(TopicPartition(topic, p), OP_TIMEOUT_S)
            _, lso = rc.get_watermark_offsets(TopicPartition(topic, p), OP_TIMEOUT_S)
            if hwm != lso:
                return
            cut[k] = hwm
        op = w.history.invoke("bank-snapshot", extra={"cut": cut})
        rc.assign([TopicPartition(*split_key(k), 0) for k in keys])
        read: dict[str, list[tuple[int, int]]] = {k: [] for k in keys}
        deadline = time.monotonic() + OP_TIMEOUT_S
        while any((read[k][-1][0] + 1 if read[k] else 0) < cut[k] for k in keys if cut[k] > 0):
            if time.monotonic() > deadline:
                w.history.complete(op, OpType.FAIL, error="snapshot read timed out")
                return
            for k, rs in _poll_records(rc, 500, 0.2).items():
                read[k] += [(o, v) for o, v in rs if o < cut[k]]
        w.history.complete(op, OpType.OK, encode_micro_ops([Poll(read)]))
    except KafkaException:
        return
    finally:
        rc.close()
        ru.close()


#: librdkafka's "Beginning partition drain ... for <why> epoch bump for N partition(s) ..."
EPOCH_BUMP_LOG = "epoch bump for"


class EosLog(logging.Handler):
    """librdkafka's `eos` debug lines (served by `poll`, in order with delivery reports) to a file, each
    epoch bump also to the history."""

    def __init__(self, w: Worker) -> None:
        super().__init__(logging.DEBUG)
        logs = w.args.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.file = (logs / f"{w.args.proc}.{w.args.inc}.eos.log").open("a", encoding="utf-8")
        self.history = w.history

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        self.file.write(f"{time.time():.3f} {line}\n")
        self.file.flush()
        if EPOCH_BUMP_LOG in line:
            self.history.record("epoch-bump", OpType.OK, {"why": line})

    def close(self) -> None:
        self.file.close()
        super().close()


def run_idem(w: Worker, topic: str = "idem") -> None:
    from confluent_kafka import Producer

    keys = [key_of(topic, p) for p in range(w.args.partitions)]
    eos = logging.getLogger(f"exactly.verify.librdkafka.{w.args.proc}")
    eos.propagate = False
    eos.setLevel(logging.DEBUG)
    eos.addHandler(EosLog(w))
    producer = Producer(
        {
            **w.producer_config(transactional=False),
            "message.timeout.ms": 60000,
            "debug": "eos",
            "logger": eos,
        }
    )

    def cb(op: Op, send: Send) -> Callable[[Any, Any], None]:
        def done(err: Any, msg: Any) -> None:
            if err is None:
                w.history.complete(
                    op, OpType.OK, encode_micro_ops([Send(send.key, send.value, msg.offset())])
                )
            else:
                w.history.complete(op, OpType.INFO, error=str(err))

        return done

    while not Stop.requested:
        for _ in range(w.rng.randint(1, 10)):
            send = Send(w.rng.choice(keys), w.next_value())
            op = w.history.invoke("send", encode_micro_ops([send]))
            topic, partition = split_key(send.key)
            producer.produce(
                topic, value=str(send.value).encode(), partition=partition, on_delivery=cb(op, send)
            )
        producer.poll(0)
        time.sleep(0.1)  # ~50 records/s: the history of an hour stays checkable
    producer.flush(30)


def run_zombie(w: Worker) -> None:
    w.reinit_on_fatal = False
    if w.args.inc > 0:
        w.init_producer()
        w.history.record("fence", OpType.OK, {"txid": w.txid}, txid=w.txid)
    run_queue(w, ("zombie",))


WORKLOADS = ("queue", "copier", "bank", "zombie", "idem", "feeder", "spark", "spark-feeder")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m exactly.verify.worker")
    parser.add_argument("workload", choices=WORKLOADS)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--proc", required=True)
    parser.add_argument("--inc", type=int, default=0)
    parser.add_argument("--number", type=int, required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--txn-timeout-ms", type=int, default=10000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--copiers", type=int, default=1)
    ns = parser.parse_args(argv)
    args = WorkerArgs(
        ns.workload,
        ns.run_dir,
        ns.proc,
        ns.inc,
        ns.number,
        ns.bootstrap,
        ns.seed,
        ns.txn_timeout_ms,
        ns.partitions,
        ns.copiers,
    )
    Stop.install()
    faulthandler.register(signal.SIGUSR1)  # the runner asks a stuck worker for its stacks
    w = Worker(args)
    code = 0
    try:
        if args.workload == "queue":
            run_queue(w, QUEUE_TOPICS)
        elif args.workload == "copier":
            run_copier(w)
        elif args.workload == "bank":
            run_bank(w)
        elif args.workload == "zombie":
            run_zombie(w)
        elif args.workload == "feeder":
            run_idem(w, "copy-in")
        elif args.workload == "spark-feeder":
            run_idem(w, "spark-in")
        elif args.workload == "spark":
            from exactly.verify.spark_job import run_spark

            run_spark(w)
        else:
            run_idem(w)
    except Fenced:
        code = 3
    finally:
        w.close_producer()
        w.history.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
