"""Authorization overhead (issue 13): produce throughput with the authorizer on and 1,000 ACLs versus off.

    python -m exactly.bench.acls [--records N] [--producers P] [--rounds R]   (or `exactly bench acls`)

Two brokers in one run: one without an authorizer, one with `StandardAuthorizer` and 1,000 ACLs (the
producer's own WRITE and IDEMPOTENT_WRITE among literal, prefixed and wildcard-principal ACLs of other
users and topics, some of which apply to the benchmark topic). The same produce workload as
`exactly bench broker` (1 KiB records, 6 partitions, acks=all, idempotent) runs R times on each, the two
alternating, and the medians are compared: ratio = on / off (the issue's target: >= 0.95). Each broker's
CPU time per GB produced is compared too: the authorizer's own cost, without the run-to-run noise of
acks=all on a shared disk that moves the throughput of two runs by up to 2x.

The authorizer-on broker takes each request's principal from its client id
(`exactly.debug.principal.by.client.id`), since PLAINTEXT connections are all User:ANONYMOUS; the
producers' librdkafka client id is `rdkafka`. Also printed: the cost of one `authorize` call with
those 1,000 ACLs, in process.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from exactly.bench.broker import PARTITIONS, RECORD_SIZE, TOPIC, cpu_seconds, produce
from exactly.security.acls import AccessControlEntry, AclBinding, PatternType, PermissionType, ResourcePattern
from exactly.security.authorizer import Authorizer
from exactly.security.operations import AclOperation, ResourceType
from exactly.security.principal import KafkaPrincipal
from exactly.testing.processes import BrokerProcess

PRODUCER = "User:rdkafka"  # librdkafka's default client.id, taken as the principal
ADMIN = "bench-admin"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def bench_acls(count: int = 1000) -> list[AclBinding]:
    """`count` ACLs: the producer's two, and others that mostly do not apply to it."""
    allow, deny = PermissionType.ALLOW, PermissionType.DENY
    lit, pre = PatternType.LITERAL, PatternType.PREFIXED
    t, c, g = ResourceType.TOPIC, ResourceType.CLUSTER, ResourceType.GROUP

    def acl(
        rt: ResourceType, name: str, pattern: PatternType, who: str, op: AclOperation, p: PermissionType
    ) -> AclBinding:
        return AclBinding(ResourcePattern(rt, name, pattern), AccessControlEntry(who, "*", op, p))

    out = [
        acl(t, TOPIC, lit, PRODUCER, AclOperation.WRITE, allow),
        acl(c, "kafka-cluster", lit, PRODUCER, AclOperation.IDEMPOTENT_WRITE, allow),
    ]
    i = 0
    while len(out) < count:
        kind = i % 5
        if kind == 0:
            out.append(acl(t, f"topic-{i}", lit, f"User:u{i}", AclOperation.WRITE, allow))
        elif kind == 1:
            out.append(acl(t, f"logs-{i}-", pre, f"User:u{i}", AclOperation.READ, allow))
        elif kind == 2:  # applies to the benchmark topic (prefix "b"/"be"/...), other principals
            out.append(acl(t, TOPIC[: 1 + i % len(TOPIC)], pre, f"User:u{i}", AclOperation.READ, allow))
        elif kind == 3:
            out.append(acl(g, f"group-{i}", lit, "User:*", AclOperation.READ, allow))
        else:
            out.append(acl(t, TOPIC, lit, f"User:u{i}", AclOperation.WRITE, deny))
        i += 1
    return out


def check_cost_us(acls: list[AclBinding], checks: int = 100_000) -> float:
    authorizer = Authorizer(acls=acls)
    principal = KafkaPrincipal.parse(PRODUCER)
    assert authorizer.authorize(principal, "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, TOPIC)
    start = time.perf_counter()
    for _ in range(checks):
        authorizer.authorize(principal, "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, TOPIC)
    return (time.perf_counter() - start) / checks * 1e6


def _prepare(bootstrap: str, acls: list[AclBinding] | None) -> None:
    from confluent_kafka.admin import AdminClient, _acl, _resource
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": ADMIN})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result()
    if acls:
        rtypes = {ResourceType.TOPIC: "TOPIC", ResourceType.CLUSTER: "BROKER", ResourceType.GROUP: "GROUP"}
        bindings = [
            _acl.AclBinding(
                _resource.ResourceType[rtypes[a.pattern.resource_type]],
                a.pattern.name,
                _resource.ResourcePatternType[a.pattern.pattern_type.name],
                a.entry.principal,
                a.entry.host,
                _acl.AclOperation[a.entry.operation.name],
                _acl.AclPermissionType[a.entry.permission.name],
            )
            for a in acls
        ]
        for future in admin.create_acls(bindings).values():
            future.result()


@dataclass(frozen=True, slots=True)
class AclBenchResult:
    off_mb_s: tuple[float, ...]  # one per round: the broker without an authorizer
    on_mb_s: tuple[float, ...]  # the broker with StandardAuthorizer and `acls` ACLs
    acls: int
    check_us: float  # one `authorize` call with those ACLs, in process
    off_cpu_s_per_gb: tuple[float, ...] = ()  # the broker process's CPU time per GB produced, per round
    on_cpu_s_per_gb: tuple[float, ...] = ()

    @property
    def off_median(self) -> float:
        return statistics.median(self.off_mb_s)

    @property
    def on_median(self) -> float:
        return statistics.median(self.on_mb_s)

    @property
    def ratio(self) -> float:
        return self.on_median / self.off_median

    @property
    def cpu_timed(self) -> bool:
        """Whether every run took enough CPU to be timed (/proc counts in clock ticks of 10 ms)."""
        return bool(self.off_cpu_s_per_gb) and min(*self.off_cpu_s_per_gb, *self.on_cpu_s_per_gb) > 0

    @property
    def cpu_ratio(self) -> float:
        """Broker CPU per GB, on / off (medians): the authorizer's cost without the disk's noise (NaN
        when a run was too short to time)."""
        if not self.cpu_timed:
            return float("nan")
        return statistics.median(self.on_cpu_s_per_gb) / statistics.median(self.off_cpu_s_per_gb)


class AclBench:
    """The two brokers of the authorization benchmark, for rounds run one at a time (`exactly bench
    security` interleaves them with the other security benchmarks' rounds). A context manager: on entry
    it starts both brokers, creates the topic, writes the ACLs and runs one unmeasured produce on each
    (page cache, first segments, interpreter); on exit it stops them."""

    def __init__(
        self, work: Path, acls: int = 1000, warmup_records: int = 60_000, producers: int = 2
    ) -> None:
        self._acls = bench_acls(acls)
        self._warmup = (max(warmup_records, producers), producers)
        self._off = BrokerProcess(work / "off" / "data")
        self._on = BrokerProcess(
            work / "on" / "data",
            f"authorizer.class.name={AUTHORIZER}",
            f"super.users=User:{ADMIN}",
            "exactly.debug.principal.by.client.id=true",
        )
        self._stack = contextlib.ExitStack()
        self._rates: dict[str, list[float]] = {"off": [], "on": [], "off_cpu": [], "on_cpu": []}

    def __enter__(self) -> AclBench:
        with contextlib.ExitStack() as stack:
            for proc in (self._off, self._on):
                proc.data_dir.parent.mkdir(parents=True, exist_ok=True)
                stack.enter_context(proc)  # starts it
            _prepare(self._off.bootstrap, None)
            _prepare(self._on.bootstrap, self._acls)
            for proc in (self._off, self._on):
                produce(proc.bootstrap, *self._warmup)
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def round(self, records: int, producers: int, index: int) -> None:
        """One run on each broker, the one without an authorizer first in even rounds."""
        order = [("off", self._off), ("on", self._on)]
        for name, proc in order if index % 2 == 0 else order[::-1]:
            assert proc.proc is not None
            cpu = cpu_seconds(proc.proc.pid)
            run = produce(proc.bootstrap, records, producers)
            cpu = cpu_seconds(proc.proc.pid) - cpu
            if run.records != records // producers * producers:
                raise RuntimeError(f"authorizer {name}: only {run.records} records delivered")
            self._rates[name].append(run.mb_s)
            self._rates[f"{name}_cpu"].append(cpu / (run.records * RECORD_SIZE / 1e9))

    def result(self, check_us: float | None = None) -> AclBenchResult:
        """`check_us`: the in-process cost of one check, measured here unless given."""
        cost = check_cost_us(self._acls) if check_us is None else check_us
        r = self._rates
        return AclBenchResult(
            tuple(r["off"]), tuple(r["on"]), len(self._acls), cost, tuple(r["off_cpu"]), tuple(r["on_cpu"])
        )


def run(records: int, producers: int, rounds: int, work: Path, acls: int = 1000) -> AclBenchResult:
    with AclBench(work, acls, records // 5, producers) as bench:
        for i in range(rounds):
            bench.round(records, producers, i)
        return bench.result()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="exactly authorization overhead benchmark")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--acls", type=int, default=1000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="exactly-bench-acls-") as tmp:
        result = run(args.records, args.producers, args.rounds, Path(tmp), args.acls)
    print(f"authorize(): {result.check_us:.2f} us per check with {result.acls} ACLs (in process)")
    for i, (off, on) in enumerate(zip(result.off_mb_s, result.on_mb_s, strict=True)):
        print(f"round {i + 1}: authorizer off {off:8.1f} MB/s, on {on:8.1f} MB/s")
    print(
        f"produce, median of {args.rounds}: off {result.off_median:.1f} MB/s, on with {result.acls} ACLs "
        f"{result.on_median:.1f} MB/s, ratio {result.ratio:.3f} (target >= 0.95); broker CPU per GB on / off "
        f"{result.cpu_ratio:.3f}"
    )


if __name__ == "__main__":
    main()
