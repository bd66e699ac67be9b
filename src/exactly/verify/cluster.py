"""The cluster a verification run with `--brokers N` (N >= 3) runs against, wired so that the nemesis can cut
any link of it: one ZooKeeper, N brokers (ids 1..N, replication factor 3, min ISR 2) and three proxies per
broker.

    client ──FaultProxy b──▶ broker b's CLIENT listener      (the frame-aware fault proxy of single-broker
                                                             runs, one per broker: proxy-* faults hit all)
    broker a ──LinkProxy b──▶ broker b's INTERNAL listener    (replica fetches, transaction markers)
    broker b ──BlackholeProxy──▶ ZooKeeper                    (broker b's zookeeper.connect)

Each broker listens on two loopback ports and advertises, in its ZooKeeper registration, the ports of its
proxies instead: `CLIENT://127.0.0.1:<fault proxy>,INTERNAL://127.0.0.1:<link proxy>`, with
`inter.broker.listener.name=INTERNAL`. Clients learn the CLIENT endpoints from Metadata, peers the INTERNAL
ones, so every byte between two processes crosses a proxy the runner owns.

A `LinkProxy` knows which broker a connection comes from by the client id of its first request
(`exactly-replica-fetcher-<id>`, `exactly-txn-markers-<id>`: the request header `size int32 | api_key int16 |
api_version int16 | correlation_id int32 | client_id int16-length string`), so that isolating broker b cuts
both b's inbound link proxy and, in every other link proxy, the connections that b opened. A cut link moves
no byte (connections stay open, as across a network partition) until it is healed.

The state the faults aim at is read from ZooKeeper directly (not through a proxy): the controller
(`/controller`), a partition's leader and ISR (`/brokers/topics/<t>/partitions/<p>/state`), the live
brokers (`/brokers/ids`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import select
import socket
import struct
import time
from pathlib import Path
from typing import Any

from exactly.group.partitioning import partition_for
from exactly.testing.cluster import cluster_settings
from exactly.testing.processes import BrokerProcess, free_port
from exactly.testing.tcp_proxy import CHUNK, POLL_INTERVAL_S, BlackholeProxy
from exactly.testing.zookeeper import ZooKeeperProcess
from exactly.verify.proxy import FaultProxy, Rule

__all__ = ["FaultProxies", "LinkProxy", "VerifyCluster", "source_broker"]

TRANSACTION_STATE = "__transaction_state"
_SOURCE = re.compile(rb"^exactly-(?:replica-fetcher|txn-markers)-(\d+)$")
#: a request header's fixed part before the client id: size, api key, api version, correlation id
_FIXED = 4 + 2 + 2 + 4


def source_broker(buffer: bytes) -> tuple[bool, int | None]:
    """(whether `buffer` holds the first request's client id yet, the broker id it names or None)."""
    if len(buffer) < _FIXED + 2:
        return False, None
    (length,) = struct.unpack_from(">h", buffer, _FIXED)
    if length < 0:
        return True, None
    if len(buffer) < _FIXED + 2 + length:
        return False, None
    match = _SOURCE.match(buffer[_FIXED + 2 : _FIXED + 2 + length])
    return True, int(match.group(1)) if match else None


class LinkProxy(BlackholeProxy):
    """The link into one broker's INTERNAL listener: `blackhole(True)` cuts every connection into it,
    `cut(b)` the connections opened by broker `b`."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        super().__init__(upstream)
        self._cut: set[int] = set()

    def start(self) -> LinkProxy:
        super().start()
        return self

    def cut(self, source: int, on: bool = True) -> None:
        with self._lock:
            if on:
                self._cut.add(source)
            else:
                self._cut.discard(source)

    def heal(self) -> None:
        with self._lock:
            self._cut.clear()
            self._blackholed = False

    def _blocked(self, source: int | None) -> bool:
        with self._lock:
            return self._blackholed or (source is not None and source in self._cut)

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        by_fd = {client.fileno(): client, server.fileno(): server}
        poller = select.poll()
        for fd in by_fd:
            poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        source: int | None = None
        known = False
        first = bytearray()  # the client's bytes until its first request's client id is known
        try:
            while not self._stop.is_set():
                if self._blocked(source):
                    self._stop.wait(POLL_INTERVAL_S)
                    continue
                if known and first:
                    server.sendall(first)
                    first.clear()
                ready = poller.poll(POLL_INTERVAL_S * 1000)
                if self._blocked(source):
                    continue
                for fd, _ in ready:
                    data = by_fd[fd].recv(CHUNK)
                    if not data:
                        return
                    if by_fd[fd] is server:
                        client.sendall(data)
                    elif known:
                        server.sendall(data)
                    else:
                        first += data
                        known, source = source_broker(bytes(first))
                        # sent at the top of the loop, unless this source's link is cut
        except OSError:
            return
        finally:
            with self._lock:
                self._socks.difference_update((client, server))
            for sock in (client, server):
                with contextlib.suppress(OSError):
                    sock.close()


class FaultProxies:
    """One `FaultProxy` per broker behind the interface the runner and the nemesis use of a single one."""

    def __init__(self, proxies: list[FaultProxy]) -> None:
        self.proxies = proxies
        self._handles: dict[int, list[int]] = {}
        self._next = 0
        self._closed = False

    @property
    def bootstrap(self) -> str:
        return ",".join(p.bootstrap for p in self.proxies)

    @property
    def enabled(self) -> bool:
        return all(p.enabled for p in self.proxies)

    @enabled.setter
    def enabled(self, on: bool) -> None:
        for p in self.proxies:
            p.enabled = on

    def add_rule(self, rule: Rule) -> int:
        self._next += 1
        self._handles[self._next] = [p.add_rule(rule) for p in self.proxies]
        return self._next

    def remove_rule(self, handle: int) -> None:
        for p, h in zip(self.proxies, self._handles.pop(handle, []), strict=False):
            p.remove_rule(h)

    def clear_rules(self) -> None:
        self._handles.clear()
        for p in self.proxies:
            p.clear_rules()

    def release_held(self, api_key: int | None = None) -> int:
        return sum(p.release_held(api_key) for p in self.proxies)

    def blackhole(self, on: bool) -> None:
        for p in self.proxies:
            p.blackhole(on)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            for p in self.proxies:
                p.close()


class VerifyCluster:
    """ZooKeeper, `n` brokers and their proxies under `root` (logs into `logs`)."""

    def __init__(self, root: Path, logs: Path, n: int, seed: int, *settings: str) -> None:
        self.n = n
        self.logs = logs
        self.zookeeper = ZooKeeperProcess(root / "zookeeper")
        (root / "zookeeper").mkdir(parents=True, exist_ok=True)
        self.brokers: dict[int, BrokerProcess] = {}
        self.zk_links: dict[int, BlackholeProxy] = {}
        self.links: dict[int, LinkProxy] = {}
        fault_proxies: list[FaultProxy] = []
        for b in range(1, n + 1):
            client_port, internal_port = free_port(), free_port()
            fault = FaultProxy(("127.0.0.1", client_port), seed=seed * 1000 + b).start()
            fault_proxies.append(fault)
            self.links[b] = LinkProxy(("127.0.0.1", internal_port)).start()
            self.zk_links[b] = BlackholeProxy(("127.0.0.1", self.zookeeper.port)).start()
            items = [
                *cluster_settings(b, self.zk_links[b].address, n, session_timeout_ms=6000),
                f"listeners=CLIENT://127.0.0.1:{client_port},INTERNAL://127.0.0.1:{internal_port}",
                f"advertised.listeners=CLIENT://127.0.0.1:{fault.port},"
                f"INTERNAL://127.0.0.1:{self.links[b].port}",
                "listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
                "inter.broker.listener.name=INTERNAL",
                *settings,
            ]
            data = root / f"broker-{b}"
            data.mkdir(parents=True, exist_ok=True)
            self.brokers[b] = BrokerProcess(
                data, *items, port=client_port, log_level="INFO", log_path=logs / f"broker-{b}.log"
            )
        self.proxy = FaultProxies(fault_proxies)
        self._zk: Any = None

    # --- processes ----------------------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> None:
        self.zookeeper.start()
        for broker in self.brokers.values():
            broker.start(timeout=60)
        missing = self.wait_whole(timeout)
        if missing:
            raise TimeoutError(f"the cluster did not form within {timeout:g} s: {'; '.join(missing)}")

    def close(self) -> None:
        for broker in self.brokers.values():
            broker.resume()
        for broker in self.brokers.values():
            with contextlib.suppress(Exception):
                broker.stop(30)
            with contextlib.suppress(Exception):
                broker.kill()
        if self._zk is not None:
            with contextlib.suppress(Exception):
                self._zk.stop()
                self._zk.close()
        with contextlib.suppress(Exception):
            self.zookeeper.stop()
        self.proxy.close()
        for proxy in (*self.links.values(), *self.zk_links.values()):
            proxy.close()

    # --- what ZooKeeper says ------------------------------------------------------------------------

    def zk(self) -> Any:
        """The runner's own ZooKeeper client (straight to the server, never cut)."""
        if self._zk is None:
            from kazoo.client import KazooClient

            # its connection warnings (ZooKeeper restarting) go to a file, not to the run's output
            logger = logging.getLogger(f"exactly.verify.zookeeper.{self.logs}")
            logger.propagate = False
            if not logger.handlers:
                handler = logging.FileHandler(self.logs / "runner-zookeeper.log")
                handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
                logger.addHandler(handler)
            # `retry` (every read below) outlives a ZooKeeper restart that expires this session: a
            # controller-kill drawn just after a zookeeper-restart once failed on SessionExpiredError
            self._zk = KazooClient(  # type: ignore[call-arg]  # the stub lacks `logger`
                hosts=self.zookeeper.connect_string,
                timeout=10.0,
                logger=logger,
                command_retry={"max_tries": -1, "max_delay": 2.0, "deadline": 60.0},
            )
            self._zk.start(timeout=30)
        return self._zk

    def _read(self, path: str) -> Any:
        data, _ = self.zk().retry(self.zk().get, path)
        return json.loads(data)

    def live_brokers(self) -> set[int]:
        return {int(b) for b in self.zk().retry(self.zk().get_children, "/brokers/ids")}

    def controller(self) -> int:
        return int(self._read("/controller")["brokerid"])

    def leader(self, topic: str, partition: int) -> int:
        return self.leadership(topic, partition)[0]

    def leadership(self, topic: str, partition: int) -> tuple[int, int]:
        """(leader, leader epoch) of a partition as ZooKeeper has it."""
        state = self._read(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return int(state["leader"]), int(state["leader_epoch"])

    def client_bootstrap(self, broker_id: int) -> str:
        """The client address (through its fault proxy) of one broker."""
        return self.proxy.proxies[broker_id - 1].bootstrap

    def partitions(self, topic: str) -> int:
        return len(self._read(f"/brokers/topics/{topic}")["partitions"])

    def coordinator(self, transactional_id: str) -> tuple[int, int]:
        """(the leader of `transactional_id`'s `__transaction_state` partition, that partition)."""
        partition = partition_for(transactional_id, self.partitions(TRANSACTION_STATE))
        return self.leader(TRANSACTION_STATE, partition), partition

    def unwhole(self) -> list[str]:
        """What keeps the cluster from being whole: a broker not running or not registered, no controller,
        a partition without a leader or with an ISR short of its replicas ([] when whole)."""
        missing = [f"broker {b} not running" for b, p in self.brokers.items() if not p.running]
        live = self.live_brokers()
        missing += [f"broker {b} not registered" for b in self.brokers if b not in live]
        if not self.zk().retry(self.zk().exists, "/controller"):
            missing.append("no controller")
        for topic in self.zk().retry(self.zk().get_children, "/brokers/topics"):
            assignment = self._read(f"/brokers/topics/{topic}")["partitions"]
            for p, replicas in assignment.items():
                try:
                    state = self._read(f"/brokers/topics/{topic}/partitions/{p}/state")
                except Exception:  # noqa: BLE001 (not created yet)
                    missing.append(f"{topic}:{p} has no state")
                    continue
                if state["leader"] < 0 or set(state["isr"]) != set(replicas):
                    missing.append(f"{topic}:{p} leader {state['leader']} isr {state['isr']}")
        return missing

    def wait_whole(self, timeout: float) -> list[str]:
        """Until `unwhole()` is empty ([]), or what still is missing after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                missing = self.unwhole()
            except Exception as e:  # noqa: BLE001 (ZooKeeper restarting)
                missing = [f"{type(e).__name__}: {e}"]
            if not missing or time.monotonic() > deadline:
                return missing
            time.sleep(0.5)

    def wait_registered(self, broker: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                if broker in self.live_brokers():
                    return True
            time.sleep(0.2)
        return False

    # --- links --------------------------------------------------------------------------------------

    def isolate(self, broker: int, on: bool = True) -> None:
        """Cut (or heal) `broker` from ZooKeeper and from every other broker, both ways; its clients still
        reach it."""
        self.zk_links[broker].blackhole(on)
        self.links[broker].blackhole(on)
        for b, link in self.links.items():
            if b != broker:
                link.cut(broker, on)

    def cut_zookeeper(self, broker: int, on: bool = True) -> None:
        self.zk_links[broker].blackhole(on)

    def heal(self) -> None:
        """Every link whole again and every paused broker resumed (the fault proxies are the runner's)."""
        for link in self.links.values():
            link.heal()
        for zk_link in self.zk_links.values():
            zk_link.blackhole(False)
        for broker in self.brokers.values():
            broker.resume()
