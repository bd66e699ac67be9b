"""The nemesis: a seeded schedule of faults against the broker, its disk, the network and the clients.

Every `interval` (uniform in [min, max] seconds, with a quiet period after each fault) it picks one fault
family among those enabled and applies one fault of it; each is recorded as a `fault` op by proc `runner`
(value `{"kind": ..., "seconds": ..., ...}`), and every broker restart as a `restart` op with its recovery
seconds (from the restart to the port accepting connections).

| kind              | what                                                                          |
|-------------------|-------------------------------------------------------------------------------|
| broker-kill       | SIGKILL, restart after 0-5 s                                                  |
| broker-pause      | SIGSTOP 1-10 s (sometimes past the transaction timeout), SIGCONT              |
| broker-restart    | SIGTERM (clean shutdown), restart                                             |
| client-kill       | SIGKILL a worker; the runner restarts it as the next incarnation              |
| client-pause      | SIGSTOP a worker past transaction.timeout.ms, SIGCONT                         |
| zombie            | SIGSTOP the zombie worker past its timeout, start its next incarnation (which |
|                   | fences it), SIGCONT the old one, let it run into the fence, stop it           |
| disk-damage       | SIGKILL, delete indexes / snapshots, garble a snapshot, stale or missing      |
|                   | recovery-point checkpoint (`exactly.verify.disk`), restart                    |
| power-loss        | SIGKILL, cut every file back towards its fsynced length (the broker's fsync   |
|                   | ledger; `exactly.verify.disk.power_loss`), restart; the fault op, recorded    |
|                   | right after the cut and before the restart, carries the surviving log ends    |
|                   | `cut` {key: offset} (the checker voids observations beyond them made before)  |
| disk-full         | shrink the data directory's tmpfs to its use + 0 B - 1 MiB, hold 2-8 s, grow  |
|                   | the broker must refuse writes and recover without a restart (if it died, the  |
|                   | fault records an `error` and the broker is restarted)                         |
| proxy-*           | delay / hold / drop / duplicate requests of one API key, or blackhole (no     |
|                   | duplicated EndTxn: KAFKA-17754, see DUPLICATE_API_KEYS)                       |

With `--brokers N` (a cluster, `exactly.verify.cluster`) the broker kinds hit a broker chosen at random,
the proxy kinds every broker's fault proxy at once, the disk kinds are off, and the `cluster` family is on
(its targets read from ZooKeeper at the moment of the fault; its fault ops name the broker and its role):

| kind              | what                                                                          |
|-------------------|-------------------------------------------------------------------------------|
| controller-kill   | SIGKILL the broker in /controller, restart after 0-5 s                        |
| controller-pause  | SIGSTOP it 1-10 s (past the 6 s ZooKeeper session: its session expires)       |
| coordinator-kill  | the same for the transaction coordinator of a worker's transactional id (the  |
| coordinator-pause | leader of its __transaction_state partition)                                  |
| leader-kill       | the same for the leader of one of the workloads' partitions                   |
| leader-pause      |                                                                               |
| rolling-restart   | every broker in turn: SIGTERM (controlled shutdown), start, wait (<= 60 s)    |
|                   | until the cluster is whole again before the next                              |
| zookeeper-restart | stop ZooKeeper (SIGTERM), start it again after 0-5 s                          |
| isolate-broker    | cut one broker from ZooKeeper and from every other broker, both ways, for     |
|                   | 8-20 s (its clients still reach it: a minority partition), then heal          |
| zookeeper-cut     | cut one broker from ZooKeeper only for 2-12 s, then heal                      |
|                   | (both cuts record `deregistered_after`: when the broker's session expired)    |
"""

from __future__ import annotations

import contextlib
import random
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from exactly.verify.history import OpType
from exactly.verify.proxy import Action, Rule
from exactly.verify.worker import split_key

if TYPE_CHECKING:
    from exactly.verify.cluster import VerifyCluster
    from exactly.verify.runner import Run

BROKER = ("broker-kill", "broker-pause", "broker-restart")
CLIENT = ("client-kill", "client-pause", "zombie")
DISK = ("disk-damage", "power-loss", "disk-full")
PROXY = (
    "proxy-delay",
    "proxy-hold",
    "proxy-drop-request",
    "proxy-drop-response",
    "proxy-duplicate",
    "proxy-blackhole",
)
CLUSTER = (
    "controller-kill",
    "controller-pause",
    "coordinator-kill",
    "coordinator-pause",
    "leader-kill",
    "leader-pause",
    "rolling-restart",
    "zookeeper-restart",
    "isolate-broker",
    "zookeeper-cut",
)
FAMILIES: dict[str, tuple[str, ...]] = {
    "broker": BROKER,
    "client": CLIENT,
    "disk": DISK,
    "proxy": PROXY,
    "cluster": CLUSTER,
}

#: in a handler's detail: the handler recorded its fault op itself
RECORDED = "_recorded"

#: the API keys whose requests the proxy faults pick from
PROXY_API_KEYS = {
    "Produce": 0,
    "AddPartitionsToTxn": 24,
    "AddOffsetsToTxn": 25,
    "EndTxn": 26,
    "TxnOffsetCommit": 28,
}
#: EndTxn is never duplicated by default: a replayed EndTxn(commit) of the same producer epoch that lands
#: after the next transaction began ends that one (KAFKA-17754; only transaction version 2 tells them apart,
#: and the workers' librdkafka speaks version 1). Seed 20261126 showed it: torn, G1a and G1c transactions
#: right after each duplicated EndTxn. tests/verify/test_proxy_scenarios.py reproduces it on purpose (a
#: strict xfail); tests/interop/test_transactions_tv2.py duplicates EndTxn of a TV2 client (exactly.client.
#: txn) through the same proxy rule, and every transaction ends as its client decided.
DUPLICATE_API_KEYS = {name: key for name, key in PROXY_API_KEYS.items() if name != "EndTxn"}


@dataclass(frozen=True, slots=True)
class Schedule:
    min_interval: float = 5.0
    max_interval: float = 15.0
    quiet: float = 3.0


class Nemesis:
    def __init__(self, run: Run, kinds: tuple[str, ...], seed: int, schedule: Schedule = Schedule()) -> None:
        self.run = run
        self.kinds = kinds
        self.rng = random.Random(f"nemesis/{seed}")
        self.schedule = schedule
        self.counts: dict[str, int] = {}
        self.seconds: dict[str, float] = {}
        self.last = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="nemesis", daemon=True)

    def start(self) -> None:
        if self.kinds:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(120)

    def _sleep(self, seconds: float) -> bool:
        """False when the run is over."""
        return not self._stop.wait(seconds)

    def _loop(self) -> None:
        s = self.schedule
        while self._sleep(self.rng.uniform(s.min_interval, s.max_interval)):
            kind = self.rng.choice(self.kinds)
            started = time.monotonic()
            try:
                detail = self.apply(kind)
            except Exception as e:  # noqa: BLE001 (a fault that could not be applied is recorded, not fatal)
                detail = {"error": f"{type(e).__name__}: {e}"}
            took = time.monotonic() - started
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.seconds[kind] = self.seconds.get(kind, 0.0) + took
            self.last = kind
            if not detail.pop(RECORDED, False):
                self.record(kind, took, detail)
            if not self._sleep(s.quiet):
                return

    def record(self, kind: str, seconds: float, detail: dict[str, Any]) -> None:
        self.run.history.record("fault", OpType.OK, {"kind": kind, "seconds": round(seconds, 3), **detail})

    def apply(self, kind: str) -> dict[str, Any]:
        handler: Callable[[], dict[str, Any]] = getattr(self, "_" + kind.replace("-", "_"))
        return handler()

    # --- broker -------------------------------------------------------------------------------------

    def _target(self) -> int | None:
        """The broker the broker kinds hit: the one broker (None), or one of a cluster's at random."""
        return None if self.run.cluster is None else self.rng.choice(sorted(self.run.brokers))

    def _named(self, broker_id: int | None, detail: dict[str, Any]) -> dict[str, Any]:
        return detail if broker_id is None else {"broker": broker_id, **detail}

    def _kill(self, broker_id: int | None) -> dict[str, Any]:
        broker = self.run.broker if broker_id is None else self.run.brokers[broker_id]
        broker.kill()
        down = self.rng.uniform(0, 5)
        self._sleep(down)
        self.run.restart_broker(broker_id)
        return self._named(broker_id, {"down": round(down, 3)})

    def _pause(self, broker_id: int | None) -> dict[str, Any]:
        broker = self.run.broker if broker_id is None else self.run.brokers[broker_id]
        paused = self.rng.uniform(1, 10)
        broker.pause()
        try:
            self._sleep(paused)
        finally:
            broker.resume()
        return self._named(broker_id, {"paused": round(paused, 3)})

    def _broker_kill(self) -> dict[str, Any]:
        return self._kill(self._target())

    def _broker_pause(self) -> dict[str, Any]:
        return self._pause(self._target())

    def _broker_restart(self) -> dict[str, Any]:
        broker_id = self._target()
        broker = self.run.broker if broker_id is None else self.run.brokers[broker_id]
        broker.stop(60)
        self.run.restart_broker(broker_id)
        return self._named(broker_id, {})

    # --- cluster ------------------------------------------------------------------------------------

    def _cluster(self) -> VerifyCluster:
        assert self.run.cluster is not None, "a cluster fault in a single-broker run"
        return self.run.cluster

    def _controller(self) -> tuple[int, dict[str, Any]]:
        return self._cluster().controller(), {"role": "controller"}

    def _coordinator(self) -> tuple[int, dict[str, Any]]:
        txid = self.rng.choice(self.run.transactional_ids())
        cluster = self._cluster()
        broker_id, partition = self._when_led(lambda: cluster.coordinator(txid))
        return broker_id, {"role": "coordinator", "txid": txid, "partition": partition}

    def _leader(self) -> tuple[int, dict[str, Any]]:
        key = self.rng.choice(self.run.keys())
        topic, partition = split_key(key)
        cluster = self._cluster()
        broker_id, _ = self._when_led(lambda: (cluster.leader(topic, partition), partition))
        return broker_id, {"role": "leader", "partition": key}

    def _when_led(self, look: Callable[[], tuple[int, int]], timeout: float = 15.0) -> tuple[int, int]:
        """`look()` once it names a leader (the partition may not exist yet, or be between leaders), else
        its last answer (leader -1) or error after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = look()
                if found[0] >= 0 or time.monotonic() > deadline:
                    return found
            except Exception:
                if time.monotonic() > deadline:
                    raise
            if not self._sleep(0.5):
                return -1, -1

    def _hit(self, target: tuple[int, dict[str, Any]], kill: bool) -> dict[str, Any]:
        broker_id, role = target
        if broker_id not in self.run.brokers:
            return {**role, "skipped": f"no leader (broker {broker_id})"}
        return {**role, **(self._kill(broker_id) if kill else self._pause(broker_id))}

    def _controller_kill(self) -> dict[str, Any]:
        return self._hit(self._controller(), kill=True)

    def _controller_pause(self) -> dict[str, Any]:
        return self._hit(self._controller(), kill=False)

    def _coordinator_kill(self) -> dict[str, Any]:
        return self._hit(self._coordinator(), kill=True)

    def _coordinator_pause(self) -> dict[str, Any]:
        return self._hit(self._coordinator(), kill=False)

    def _leader_kill(self) -> dict[str, Any]:
        return self._hit(self._leader(), kill=True)

    def _leader_pause(self) -> dict[str, Any]:
        return self._hit(self._leader(), kill=False)

    def _rolling_restart(self) -> dict[str, Any]:
        cluster = self._cluster()
        waits: list[float] = []
        for broker_id in sorted(self.run.brokers):
            if self._stop.is_set():
                break
            with contextlib.suppress(subprocess.TimeoutExpired):  # killed after 60 s: restarted all the same
                self.run.brokers[broker_id].stop(60)
            self.run.restart_broker(broker_id)
            started = time.monotonic()
            missing = cluster.wait_whole(60)
            waits.append(round(time.monotonic() - started, 3))
            if missing:
                return {"brokers": sorted(self.run.brokers), "whole_after": waits, "error": missing[:3]}
        return {"brokers": sorted(self.run.brokers), "whole_after": waits}

    def _zookeeper_restart(self) -> dict[str, Any]:
        zookeeper = self._cluster().zookeeper
        zookeeper.stop()
        down = self.rng.uniform(0, 5)
        try:
            self._sleep(down)
        finally:
            zookeeper.start()
        return {"down": round(down, 3)}

    def _isolate_broker(self) -> dict[str, Any]:
        cluster = self._cluster()
        broker_id = self.rng.choice(sorted(self.run.brokers))
        held = self.rng.uniform(8, 20)
        was_controller = cluster.controller() == broker_id
        cluster.isolate(broker_id)
        try:
            gone = self._hold_cut(broker_id, held)
        finally:
            cluster.isolate(broker_id, on=False)
        return {
            "broker": broker_id,
            "for": round(held, 3),
            "was_controller": was_controller,
            "deregistered_after": gone,
        }

    def _zookeeper_cut(self) -> dict[str, Any]:
        cluster = self._cluster()
        broker_id = self.rng.choice(sorted(self.run.brokers))
        held = self.rng.uniform(2, 12)
        cluster.cut_zookeeper(broker_id)
        try:
            gone = self._hold_cut(broker_id, held)
        finally:
            cluster.cut_zookeeper(broker_id, on=False)
        return {"broker": broker_id, "for": round(held, 3), "deregistered_after": gone}

    def _hold_cut(self, broker_id: int, held: float) -> float | None:
        """Wait `held` seconds of a cut; when (seconds into it) the broker's ZooKeeper registration vanished
        (its session expired), None if it did not."""
        cluster = self._cluster()
        started = time.monotonic()
        gone: float | None = None
        while (left := held - (time.monotonic() - started)) > 0 and self._sleep(min(0.5, left)):
            if gone is None:
                with contextlib.suppress(Exception):  # ZooKeeper restarting: look again
                    if broker_id not in cluster.live_brokers():
                        gone = round(time.monotonic() - started, 3)
        return gone

    # --- clients ------------------------------------------------------------------------------------

    def _client_kill(self) -> dict[str, Any]:
        name = self.rng.choice(self.run.worker_names(exclude=("zombie",)))
        self.run.kill_worker(name)
        return {"proc": name}

    def _client_pause(self) -> dict[str, Any]:
        name = self.rng.choice(self.run.worker_names(exclude=("zombie",)))
        paused = self.run.config.txn_timeout_ms / 1000 + self.rng.uniform(1, 4)
        self.run.pause_worker(name)
        try:
            self._sleep(paused)
        finally:
            self.run.resume_worker(name)
        return {"proc": name, "paused": round(paused, 3)}

    def _zombie(self) -> dict[str, Any]:
        names = self.run.worker_names(only="zombie")
        if not names:
            return {"skipped": "no zombie worker"}
        name = self.rng.choice(names)
        old = self.run.pause_worker(name)
        self._sleep(self.run.config.txn_timeout_ms / 1000 + 2)
        self.run.start_worker(name)  # the next incarnation: it fences the paused one
        self._sleep(3)
        old.resume()
        self._sleep(4)
        old.stop()
        return {"proc": name}

    # --- disk ---------------------------------------------------------------------------------------

    def _disk_damage(self) -> dict[str, Any]:
        from exactly.verify.disk import damage

        self.run.broker.kill()
        done = damage(self.run.data_dir, self.rng, ledger=self.run.disk.ledger)
        self.run.restart_broker()
        return {"damage": [[d.kind, d.path] for d in done]}

    def _power_loss(self) -> dict[str, Any]:
        from exactly.verify.disk import power_loss

        started = time.monotonic()
        self.run.broker.kill()
        loss = power_loss(self.run.data_dir, self.run.disk.ledger, self.rng)
        # recorded now, before the restart: observations beyond `cut` made before this instant are void
        detail = {
            "cut": loss.cut,
            "files_cut": loss.files_cut,
            "bytes_removed": loss.bytes_removed,
            "garbage_tails": loss.garbage_tails,
        }
        self.record("power-loss", time.monotonic() - started, detail)
        self.run.restart_broker()
        return {RECORDED: True}

    def _disk_full(self) -> dict[str, Any]:
        limit = self.run.disk.limit
        if limit is None:
            return {"skipped": self.run.disk.skipped_full}
        leave = self.rng.choice((0, 4096, 1 << 20))
        held = self.rng.uniform(2, 8)
        filled = self.run.disk.fill(leave)
        try:
            self._sleep(held)
        finally:
            self.run.disk.free()
        detail: dict[str, Any] = {**filled, "left": leave, "held": round(held, 3)}
        if not self.run.broker.running:
            code = self.run.broker.proc.returncode if self.run.broker.proc is not None else None
            detail["error"] = f"the broker exited ({code}) on a full disk"
            self.run.restart_broker()
        return detail

    # --- network (the frame-aware proxy) ------------------------------------------------------------

    def _proxy_rule(
        self, action: Action, keys: dict[str, int] = PROXY_API_KEYS, **fields: Any
    ) -> dict[str, Any]:
        api = self.rng.choice(sorted(keys))
        handle = self.run.proxy.add_rule(Rule(action, frozenset({keys[api]}), **fields))
        held = self.rng.uniform(2, 8)
        try:
            self._sleep(held)
        finally:
            self.run.proxy.remove_rule(handle)
            released = self.run.proxy.release_held()
        return {"api": api, "for": round(held, 3), "released": released, **fields}

    def _proxy_delay(self) -> dict[str, Any]:
        return self._proxy_rule(
            Action.DELAY, delay_ms=self.rng.choice((200, 1000, 3000, 6000)), probability=0.5
        )

    def _proxy_hold(self) -> dict[str, Any]:
        return self._proxy_rule(Action.HOLD, limit=1)

    def _proxy_drop_request(self) -> dict[str, Any]:
        return self._proxy_rule(Action.DROP_REQUEST, probability=0.3)

    def _proxy_drop_response(self) -> dict[str, Any]:
        return self._proxy_rule(Action.DROP_RESPONSE, probability=0.3)

    def _proxy_duplicate(self) -> dict[str, Any]:
        return self._proxy_rule(Action.DUPLICATE, DUPLICATE_API_KEYS, probability=0.3)

    def _proxy_blackhole(self) -> dict[str, Any]:
        held = self.rng.uniform(2, 12)
        self.run.proxy.blackhole(True)
        try:
            self._sleep(held)
        finally:
            self.run.proxy.blackhole(False)
        return {"for": round(held, 3)}
