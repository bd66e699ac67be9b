"""Security benchmark (issue 13's closing note): the three security figures in one run, one table.

    python -m exactly.bench.security [--records N] [--producers P] [--rounds R] [--connections C]
    exactly bench security ...

In one process, with the brokers of the three security benchmarks running side by side:
- TLS (exactly.bench.tls): produce throughput over mutual TLS vs PLAINTEXT on one broker; target: the
  ratio of the medians >= 0.7;
- SASL (exactly.bench.sasl): connection setup time (connect + ApiVersions + SASL + Metadata) over
  SASL/SCRAM vs PLAINTEXT, p50;
- ACLs (exactly.bench.acls): produce throughput with StandardAuthorizer and 1,000 ACLs vs no authorizer;
  target: at most 5% less (ratio of the medians >= 0.95).
Each round runs one TLS pair (plaintext, TLS), one ACL pair (off, on) and C connections of each SASL
kind, so that a change in the machine's load during the run touches every figure alike; within a pair the
order alternates from round to round. The table prints the medians over the rounds, the per-round values,
the ratios of the medians with PASS or MISS against the two targets, the medians of the rounds' own ratios
(steadier when the machine's load changes during the run), and the load averages at start and end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from exactly.bench.acls import AclBench, AclBenchResult
from exactly.bench.broker import PARTITIONS
from exactly.bench.sasl import SaslBench, SaslBenchResult
from exactly.bench.tls import TlsBench, TlsBenchResult

TLS_TARGET = 0.7  # TLS / plaintext produce throughput, at least
ACL_TARGET = 0.95  # authorizer on / off produce throughput, at least (<= 5% loss)
SCRAM_KINDS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, slots=True)
class SecurityBenchResult:
    tls: TlsBenchResult
    sasl: SaslBenchResult
    acls: AclBenchResult
    records: int
    producers: int
    rounds: int
    connections: int  # per SASL kind and round
    load: tuple[tuple[float, float, float], tuple[float, float, float]]  # load averages at start, at end

    @property
    def tls_pass(self) -> bool:
        return self.tls.ratio >= TLS_TARGET

    @property
    def acls_pass(self) -> bool:
        return self.acls.ratio >= ACL_TARGET


def run(
    records: int,
    producers: int,
    rounds: int,
    connections: int,
    work: Path,
    acls: int = 1000,
    iterations: int = 4096,
    tls_settings: tuple[str, ...] = (),
) -> SecurityBenchResult:
    """`connections`: SASL connections of each kind per round; `tls_settings`: more settings of the TLS
    benchmark's broker (`key=value`)."""
    load_start = os.getloadavg()
    for name in ("tls", "sasl", "acls"):
        (work / name).mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        tls = stack.enter_context(TlsBench(work / "tls", tls_settings))
        sasl = stack.enter_context(SaslBench(iterations, work / "sasl"))
        acl = stack.enter_context(AclBench(work / "acls", acls, records // 5, producers))
        for i in range(rounds):
            tls.round(records, producers, i)
            acl.round(records, producers, i)
            sasl.round(connections)
        figures = (tls.result(), sasl.result(), acl.result())
        load = (load_start, os.getloadavg())
        return SecurityBenchResult(*figures, records, producers, rounds, connections, load)


def _row(figure: str, median: str, rounds: str = "", target: str = "", verdict: str = "") -> str:
    return f"{figure:<44} {median:>9}  {target:<8} {verdict:<5} {rounds}".rstrip()


def _paired(over: tuple[float, ...], under: tuple[float, ...]) -> str:
    """The median of the rounds' own ratios (each pair ran back to back, so a change in the machine's
    load between rounds touches both of a pair): the ratio of the medians is the figure judged."""
    ratios = [a / b for a, b in zip(over, under, strict=True)]
    return f"median of the rounds' ratios {statistics.median(ratios):.3f}"


def table(r: SecurityBenchResult) -> list[str]:
    """The report: one line per figure (name, median, target, PASS/MISS, the rounds' or percentiles)."""

    def each(values: tuple[float, ...]) -> str:
        return "rounds " + ", ".join(f"{v:.1f}" for v in values)

    verdict = {True: "PASS", False: "MISS"}
    tls, sasl, acls = r.tls, r.sasl, r.acls
    lines = [
        f"exactly bench security: {r.rounds} rounds; produce runs of {r.records} records of 1 KiB, "
        f"{r.producers} producers, {PARTITIONS} partitions, acks=all, idempotent; "
        f"{r.connections} SASL connections per kind per round",
        _row("figure", "median", "detail", "target", "met"),
        _row("produce PLAINTEXT MB/s", f"{tls.plaintext_median:.1f}", each(tls.plaintext_mb_s)),
        _row("produce mutual TLS MB/s", f"{tls.tls_median:.1f}", each(tls.tls_mb_s)),
        _row(
            "TLS / PLAINTEXT",
            f"{tls.ratio:.2f}",
            _paired(tls.tls_mb_s, tls.plaintext_mb_s),
            f">= {TLS_TARGET}",
            verdict[r.tls_pass],
        ),
    ]
    for kind in ("PLAINTEXT", *SCRAM_KINDS):
        detail = f"p99 {sasl.p99(kind):.2f} ms"
        if kind != "PLAINTEXT":
            detail += f", p50 +{sasl.p50(kind) - sasl.p50('PLAINTEXT'):.2f} ms over PLAINTEXT"
        lines.append(_row(f"connection setup {kind} p50 ms", f"{sasl.p50(kind):.2f}", detail))
    lines += [
        _row("produce, no authorizer MB/s", f"{acls.off_median:.1f}", each(acls.off_mb_s)),
        _row(f"produce, authorizer + {acls.acls} ACLs MB/s", f"{acls.on_median:.1f}", each(acls.on_mb_s)),
        _row(
            "ACLs on / off",
            f"{acls.ratio:.3f}",
            _paired(acls.on_mb_s, acls.off_mb_s),
            f">= {ACL_TARGET}",
            verdict[r.acls_pass],
        ),
        _row(
            "broker CPU per GB, ACLs on / off",
            f"{acls.cpu_ratio:.3f}",
            _paired(acls.on_cpu_s_per_gb, acls.off_cpu_s_per_gb)
            if acls.cpu_timed
            else "runs too short to time",
        ),
        f"(broker CPU per GB produced, medians: PLAINTEXT {tls.plaintext_cpu_median:.1f} s, "
        f"TLS {tls.tls_cpu_median:.1f} s; authorize() {acls.check_us:.2f} us per check with "
        f"{acls.acls} ACLs in process; SCRAM iterations {sasl.iterations})",
        "(load average, 1/5/15 min: at start "
        + ", ".join(f"{x:.2f}" for x in r.load[0])
        + "; at end "
        + ", ".join(f"{x:.2f}" for x in r.load[1])
        + f"; {os.cpu_count()} CPUs)",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    """Prints the table; returns 0 whether or not the targets are met (they are figures, not checks)."""
    parser = argparse.ArgumentParser(description="exactly security benchmark: TLS, SASL, ACLs in one run")
    parser.add_argument("--records", type=int, default=300_000, help="records per produce run (1 KiB each)")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=100, help="SASL connections per kind per round")
    parser.add_argument("--acls", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=4096, help="SCRAM iterations of the user")
    parser.add_argument("--set", action="append", default=[], help="a setting of the TLS broker, key=value")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="exactly-bench-security-") as tmp:
        result = run(
            args.records,
            args.producers,
            args.rounds,
            args.connections,
            Path(tmp),
            args.acls,
            args.iterations,
            tuple(args.set),
        )
    print("\n".join(table(result)))
    return 0


if __name__ == "__main__":
    main()
