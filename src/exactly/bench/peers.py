"""Peer brokers for the benchmark report: Kafka-compatible brokers installed on this machine.

`find_peers()` looks on PATH for the binaries below. A peer the report can start itself is Apache
Kafka (`kafka-server-start.sh` next to `kafka-storage.sh`): one KRaft node (broker + controller) on a
temporary directory, with the one-node settings (replication factor 1 for the internal topics), started
like `exactly serve` and stopped with SIGTERM. Any other peer is listed with a note; a running instance
of any broker can be benchmarked with `exactly bench report --peer-bootstrap HOST:PORT`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

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
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, base64url without padding (as `kafka-storage random-uuid`)."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
