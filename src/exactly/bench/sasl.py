"""SASL benchmark (issue 13): connection setup time over SASL/SCRAM vs PLAINTEXT, in one run, on one broker.

    python -m exactly.bench.sasl [--connections N] [--iterations I]
    exactly bench sasl ...

One broker with two listeners, PLAINTEXT and SASL_PLAINTEXT; the user is written into the metadata log
before the broker starts (as `exactly users add --data-dir`). A setup is what a client does before its
first real request, timed from before `connect()` to the answer of that request: TCP connect, ApiVersions,
[SaslHandshake, SaslAuthenticate x1 (PLAIN) or x2 (SCRAM, the client's PBKDF2 included, as librdkafka
computes it too)], Metadata (no topics). Kinds are interleaved, one connection at a time; the figures are
p50 and p99 per kind. `connection.failed.authentication.delay.ms` plays no part (every login succeeds).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from exactly.bench.broker import BROKER_START_TIMEOUT
from exactly.client.connection import KafkaConnection
from exactly.client.security import ClientSecurity
from exactly.cluster.metadata import ClusterMetadata
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.protocol.messages.metadata import MetadataRequest
from exactly.security.listeners import SecurityProtocol
from exactly.security.sasl import make_scram_credential
from exactly.testing.processes import BrokerProcess, free_port, wait_until_listening

USER, PASSWORD = "bench", "bench-password"
KINDS = ("PLAINTEXT", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, slots=True)
class SaslBenchResult:
    setup_ms: dict[str, tuple[float, ...]]  # kind -> one sample per connection
    iterations: int

    def p50(self, kind: str) -> float:
        return statistics.median(self.setup_ms[kind])

    def p99(self, kind: str) -> float:
        samples = sorted(self.setup_ms[kind])
        return samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def _security(kind: str) -> ClientSecurity:
    return ClientSecurity(SecurityProtocol.SASL_PLAINTEXT, kind, USER, PASSWORD)


def setup_once(port: int, kind: str) -> float:
    """Milliseconds from connect() to the Metadata answer."""
    started = time.perf_counter()
    with KafkaConnection.open("127.0.0.1", port, client_id="bench", timeout=10) as connection:
        connection.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("bench", "1"))
        if kind != "PLAINTEXT":
            _security(kind).authenticate(connection.request)
        connection.request(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
        return (time.perf_counter() - started) * 1000


class SaslBench:
    """The broker of the SASL benchmark, for batches of connections run one at a time (`exactly bench
    security` interleaves them with the other security benchmarks' rounds). A context manager: on entry it
    writes the user, starts the broker and makes one unmeasured connection of each kind; on exit it stops
    the broker."""

    def __init__(self, iterations: int, work: Path) -> None:
        self.iterations = iterations
        self._work = work
        self._broker: BrokerProcess | None = None
        self._ports = (0, 0)
        self._samples: dict[str, list[float]] = {kind: [] for kind in KINDS}

    def __enter__(self) -> SaslBench:
        data = self._work / "data"
        metadata = ClusterMetadata(data)
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            credential = make_scram_credential(mechanism, PASSWORD, self.iterations)
            metadata.set_scram_credential(USER, mechanism, credential)
        metadata.close()
        plain_port, sasl_port = free_port(), free_port()
        listeners = f"listeners=PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
        self._broker = BrokerProcess(data, listeners, port=plain_port)
        self._ports = (plain_port, sasl_port)
        try:
            self._broker.start(BROKER_START_TIMEOUT)
            wait_until_listening(self._broker.proc, sasl_port, BROKER_START_TIMEOUT)
            for kind in KINDS:  # warm-up
                setup_once(self._port(kind), kind)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        if self._broker is not None:
            self._broker.stop(30)
            self._broker = None

    def _port(self, kind: str) -> int:
        return self._ports[0] if kind == "PLAINTEXT" else self._ports[1]

    def round(self, connections: int) -> None:
        """`connections` more connections of each kind, one at a time, the kinds' order alternating."""
        assert self._broker is not None, "SaslBench is used outside its `with` block"
        for _ in range(connections):
            done = len(self._samples[KINDS[0]])
            for kind in KINDS if done % 2 == 0 else KINDS[::-1]:
                self._samples[kind].append(setup_once(self._port(kind), kind))

    def result(self) -> SaslBenchResult:
        return SaslBenchResult({k: tuple(v) for k, v in self._samples.items()}, self.iterations)


def run(connections: int, iterations: int, work: Path) -> SaslBenchResult:
    with SaslBench(iterations, work) as bench:
        bench.round(connections)
        return bench.result()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="exactly SASL connection setup benchmark")
    parser.add_argument("--connections", type=int, default=300, help="connections per kind")
    parser.add_argument("--iterations", type=int, default=4096, help="SCRAM iterations of the user")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="exactly-bench-sasl-") as tmp:
        result = run(args.connections, args.iterations, Path(tmp))
    base = result.p50("PLAINTEXT")
    for kind in KINDS:
        extra = "" if kind == "PLAINTEXT" else f"  (+{result.p50(kind) - base:.2f} ms)"
        figures = f"p50 {result.p50(kind):6.2f} ms, p99 {result.p99(kind):6.2f} ms"
        print(f"connection setup {kind:>13}: {figures}{extra}")
    print(
        f"({args.connections} connections per kind, interleaved; connect + ApiVersions + SASL + Metadata; "
        f"SCRAM iterations {result.iterations})"
    )


if __name__ == "__main__":
    main()
