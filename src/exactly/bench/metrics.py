"""Metrics benchmark (issue 26): what the metrics cost the produce path, and what a scrape costs.

    python -m exactly.bench.metrics [--records N] [--producers P] [--rounds R] [--partitions 1000,10000]
    exactly bench metrics ...

In one run, on one machine:

* produce throughput with metrics on versus off: two brokers, one with `metrics.listener` (so every
  request is timed and counted, every produced batch counted per topic) and one without; each round runs
  `exactly.bench.broker.produce` (P confluent-kafka producer processes, 1 KiB records, 6 partitions,
  acks=all, idempotent) against each, the order alternating from round to round, while a scraper reads
  the metered broker's /metrics every second (Prometheus' default is every 15 s: this is harsher). The
  figures are the medians of the rounds and their ratio (target >= 0.97).
* scrape time and response size at each partition count: topics of 100 partitions are created on the
  metered broker until it holds that many partitions, then /metrics is read five times (median time,
  plain and gzip-compressed size), and `/healthz` is timed during a scrape (the event loop stays free).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from exactly.bench.broker import BROKER_START_TIMEOUT, PARTITIONS, produce
from exactly.testing.processes import BrokerProcess, free_port

TOPIC = "bench-metrics"
SCRAPE_INTERVAL_S = 1.0


@dataclass(frozen=True, slots=True)
class ScrapeFigures:
    partitions: int
    seconds: float  # median of the scrapes
    plain_bytes: int
    gzip_bytes: int
    healthz_during_scrape_s: float  # the longest /healthz answer while a scrape ran


def _get(url: str, gzipped: bool = False) -> bytes:
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"} if gzipped else {})
    with urllib.request.urlopen(request, timeout=60) as response:
        body: bytes = response.read()
        return body


class _Scraper(threading.Thread):
    """Reads /metrics every `interval` until stopped."""

    def __init__(self, url: str, interval: float) -> None:
        super().__init__(daemon=True)
        self.url, self.interval = url, interval
        self.stopped = threading.Event()
        self.scrapes = 0

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            _get(self.url, gzipped=True)
            self.scrapes += 1


def _create_topics(bootstrap: str, prefix: str, partitions: int, per_topic: int = 100) -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"{prefix}-{i}" for i in range(-(-partitions // per_topic))]
    for start in range(0, len(names), 10):
        futures = admin.create_topics(
            [NewTopic(name, per_topic, 1) for name in names[start : start + 10]], request_timeout=120
        )
        for future in futures.values():
            future.result()


def scrape_figures(metrics_url: str, partitions: int) -> ScrapeFigures:
    times = []
    for _ in range(5):
        start = time.perf_counter()
        plain = _get(f"{metrics_url}/metrics")
        times.append(time.perf_counter() - start)
    zipped = _get(f"{metrics_url}/metrics", gzipped=True)
    for line in plain.decode().splitlines():  # the partitions the broker holds, internal topics included
        if line.startswith("kafka_server_replicamanager_partitioncount "):
            partitions = int(float(line.split()[1]))
    longest = 0.0
    done = threading.Event()

    def probe() -> None:
        nonlocal longest
        while not done.is_set():
            start = time.perf_counter()
            _get(f"{metrics_url}/healthz")
            longest = max(longest, time.perf_counter() - start)

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    _get(f"{metrics_url}/metrics")
    done.set()
    prober.join()
    return ScrapeFigures(partitions, statistics.median(times), len(plain), len(zipped), longest)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", default="1000,10000", help="partition counts to scrape at")
    args = parser.parse_args(argv)
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    with tempfile.TemporaryDirectory(prefix="exactly-bench-metrics-") as work:
        for name in ("on", "off"):
            (Path(work) / name).mkdir()
        metrics_port = free_port()
        metrics_url = f"http://127.0.0.1:{metrics_port}"
        on = BrokerProcess(
            Path(work) / "on" / "data", f"metrics.listener={metrics_url}", "exactly.log.max.open.files=30000"
        )
        off = BrokerProcess(Path(work) / "off" / "data")
        on.start(BROKER_START_TIMEOUT)
        off.start(BROKER_START_TIMEOUT)
        try:
            for broker in (on, off):
                admin = AdminClient({"bootstrap.servers": broker.bootstrap})
                admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result()
                del admin
            rates: dict[str, list[float]] = {"on": [], "off": []}
            scrapes = 0
            for round_ in range(args.rounds):
                order = [("on", on), ("off", off)] if round_ % 2 == 0 else [("off", off), ("on", on)]
                for name, broker in order:
                    scraper = _Scraper(f"{metrics_url}/metrics", SCRAPE_INTERVAL_S) if name == "on" else None
                    if scraper is not None:
                        scraper.start()
                    run = produce(broker.bootstrap, args.records, args.producers, TOPIC)
                    if scraper is not None:
                        scraper.stopped.set()
                        scraper.join()
                        scrapes += scraper.scrapes
                    rates[name].append(run.mb_s)
                    rate = f"{run.mb_s:.1f} MB/s ({run.records_s:,.0f} records/s)"
                    print(f"round {round_ + 1}: metrics {name}: {rate}", flush=True)
            on_median, off_median = statistics.median(rates["on"]), statistics.median(rates["off"])
            print(
                f"produce, metrics on: {on_median:.1f} MB/s; off: {off_median:.1f} MB/s; "
                f"ratio {on_median / off_median:.3f} (target >= 0.97); {scrapes} scrapes during the 'on' runs"
            )
            off.stop()
            held = PARTITIONS
            for count in (int(p) for p in args.partitions.split(",")):
                if count > held:
                    started = time.perf_counter()
                    _create_topics(on.bootstrap, f"scrape-{held}", count - held)
                    print(f"created {count - held} partitions in {time.perf_counter() - started:.1f} s")
                    held = count
                figures = scrape_figures(metrics_url, count)
                print(
                    f"scrape at {figures.partitions} partitions: {figures.seconds * 1000:.0f} ms, "
                    f"{figures.plain_bytes / 1e6:.2f} MB plain, {figures.gzip_bytes / 1e6:.2f} MB gzip; "
                    f"longest /healthz during a scrape {figures.healthz_during_scrape_s * 1000:.0f} ms"
                )
        finally:
            for broker in (on, off):
                if broker.proc is not None and broker.proc.poll() is None:
                    broker.stop()


if __name__ == "__main__":
    main()
