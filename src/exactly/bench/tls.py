"""TLS benchmark (issue 13): produce throughput over mutual TLS vs plaintext, in one run, on one broker.

    python -m exactly.bench.tls [--records N] [--producers P] [--rounds R]
    exactly bench tls ...

One broker with two listeners: PLAINTEXT and SSL (ssl.client.auth=required, certificates made by `trustme`
— a development dependency — in a temporary directory). Each round runs `exactly.bench.broker.produce`
(P confluent-kafka producer processes, 1 KiB records, 6 partitions, acks=all, idempotent) once through
each listener, the order alternating from round to round; the figures are the medians of the rounds and
their ratio (target >= 0.7), and the broker process's CPU time per GB produced through each listener
(on a 2-core machine the producers' own encryption competes with the broker for the cores, so the CPU
figure says what TLS costs the broker itself).

Where the TLS cost goes (perf, py-spy and perf uprobes on a 2-core VM, OpenSSL 3.0, librdkafka 2.16):
librdkafka writes TLS records of about 2 KB (some 94,000 SSL_read calls in the broker per 200,000 records
produced, whatever linger.ms or message.copy.max.bytes), and OpenSSL spends 2.2-2.5 us on each one it
decrypts (TLS 1.3, AES-256-GCM; TLS 1.2 about 14% less, AES-128-GCM about 5% less; 16 KB records would
cost less than half as much per byte): about 1.2 s per GB of the 2.5-3 s per GB that TLS adds to the
broker's 2.5-4.5 s, the rest being uvloop's TLS layer. The producers' own encryption costs them about as
much again (8-12 s per GB vs 6-9 s), so on a busy 2-core machine the ratio is bounded near 0.7 by the records'
size. (The broker already calls OpenSSL's `read` and `pending` without the pure-Python `ssl.SSLObject`
frames: exactly.security.tls._DirectSSLObject.) On a quiet machine the run is CPU-bound (1-12% idle).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from exactly.bench.broker import (
    BROKER_START_TIMEOUT,
    PARTITIONS,
    RECORD_SIZE,
    cpu_seconds,
    produce,
)
from exactly.testing.processes import BrokerProcess, free_port

TOPIC = "bench-tls"


@dataclass(frozen=True, slots=True)
class TlsBenchResult:
    plaintext_mb_s: tuple[float, ...]  # one per round
    tls_mb_s: tuple[float, ...]
    plaintext_cpu_s_per_gb: tuple[float, ...]  # the broker process's CPU time per GB produced
    tls_cpu_s_per_gb: tuple[float, ...]

    @property
    def plaintext_median(self) -> float:
        return statistics.median(self.plaintext_mb_s)

    @property
    def tls_median(self) -> float:
        return statistics.median(self.tls_mb_s)

    @property
    def ratio(self) -> float:
        return self.tls_median / self.plaintext_median

    @property
    def plaintext_cpu_median(self) -> float:
        return statistics.median(self.plaintext_cpu_s_per_gb)

    @property
    def tls_cpu_median(self) -> float:
        return statistics.median(self.tls_cpu_s_per_gb)


def _certificates(directory: Path) -> dict[str, Path]:
    try:
        import trustme
    except ImportError:
        raise SystemExit("the TLS benchmark needs trustme (pip install '.[dev]')") from None
    ca = trustme.CA(organization_name="exactly bench")
    paths = {name: directory / f"{name}.pem" for name in ("ca", "server", "client_cert", "client_key")}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(paths["server"]))
    client = ca.issue_cert("bench@example.com", common_name="bench")
    client.cert_chain_pems[0].write_to_path(str(paths["client_cert"]))
    client.private_key_pem.write_to_path(str(paths["client_key"]))
    return paths


class TlsBench:
    """The broker of the TLS benchmark, for rounds run one at a time (`exactly bench security` interleaves
    them with the other security benchmarks' rounds). Use as a context manager: it starts the broker and
    creates the topic on entry and stops the broker on exit."""

    def __init__(self, work: Path, broker_settings: tuple[str, ...] = ()) -> None:
        """`broker_settings`: more `key=value` broker settings (e.g. ssl.protocol=TLSv1.2)."""
        self._work = work
        self._broker_settings = broker_settings
        self._broker: BrokerProcess | None = None
        self._ports = (0, 0)
        self._tls_config: dict[str, str] = {}
        self._samples: dict[str, list[float]] = {k: [] for k in ("plain", "tls", "plain_cpu", "tls_cpu")}

    def __enter__(self) -> TlsBench:
        certs = _certificates(self._work)
        plain_port, ssl_port = free_port(), free_port()
        settings = [
            f"listeners=PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{ssl_port}",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={certs['server']}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={certs['ca']}",
            "ssl.client.auth=required",
            *self._broker_settings,
        ]
        self._broker = BrokerProcess(self._work / "data", *settings, port=plain_port)
        try:
            self._broker.start(BROKER_START_TIMEOUT)
            from confluent_kafka.admin import AdminClient
            from confluent_kafka.cimpl import NewTopic

            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain_port}"})
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result()
        except BaseException:
            self._stop()
            raise
        self._ports = (plain_port, ssl_port)
        self._tls_config = {
            "security.protocol": "SSL",
            "ssl.ca.location": str(certs["ca"]),
            "ssl.certificate.location": str(certs["client_cert"]),
            "ssl.key.location": str(certs["client_key"]),
        }
        return self

    def __exit__(self, *_: object) -> None:
        self._stop()

    def _stop(self) -> None:
        if self._broker is not None:
            self._broker.stop(30)
            self._broker = None

    def round(self, records: int, producers: int, index: int) -> None:
        """One run through each listener, PLAINTEXT first in even rounds, TLS first in odd ones."""
        assert self._broker is not None, "TlsBench is used outside its `with` block"
        order = [("plain", self._ports[0], None), ("tls", self._ports[1], self._tls_config)]
        for name, port, config in order if index % 2 == 0 else order[::-1]:
            cpu = cpu_seconds(self._broker.pid)
            result = produce(f"127.0.0.1:{port}", records, producers, TOPIC, config)
            cpu = cpu_seconds(self._broker.pid) - cpu
            if result.records != records // producers * producers:
                raise RuntimeError(f"only {result.records} records delivered")
            self._samples[name].append(result.mb_s)
            self._samples[f"{name}_cpu"].append(cpu / (result.records * RECORD_SIZE / 1e9))

    def result(self) -> TlsBenchResult:
        s = self._samples
        return TlsBenchResult(tuple(s["plain"]), tuple(s["tls"]), tuple(s["plain_cpu"]), tuple(s["tls_cpu"]))


def run(
    records: int, producers: int, rounds: int, work: Path, broker_settings: tuple[str, ...] = ()
) -> TlsBenchResult:
    """`broker_settings`: more `key=value` broker settings (e.g. ssl.protocol=TLSv1.2)."""
    with TlsBench(work, broker_settings) as bench:
        for i in range(rounds):
            bench.round(records, producers, i)
        return bench.result()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="exactly TLS benchmark")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], help="a broker setting key=value")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="exactly-bench-tls-") as tmp:
        result = run(args.records, args.producers, args.rounds, Path(tmp), tuple(args.set))
    pairs = zip(result.plaintext_mb_s, result.tls_mb_s, strict=True)
    rounds = ", ".join(f"{p:.0f}/{t:.0f}" for p, t in pairs)
    print(f"produce over PLAINTEXT: {result.plaintext_median:8.1f} MB/s (median of {args.rounds})")
    print(f"produce over mutual TLS: {result.tls_median:7.1f} MB/s (median of {args.rounds})")
    print(f"TLS / plaintext: {result.ratio:.2f} (target >= 0.7); rounds plain/TLS MB/s: {rounds}")
    plain_cpu, tls_cpu = result.plaintext_cpu_median, result.tls_cpu_median
    print(f"broker CPU per GB produced: plaintext {plain_cpu:.1f} s, mutual TLS {tls_cpu:.1f} s (medians)")
    print(f"({args.producers} producers, 1 KiB records, {PARTITIONS} partitions, acks=all, idempotent)")


if __name__ == "__main__":
    main()
