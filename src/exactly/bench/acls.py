"""Authorization overhead (issue 13): produce throughput with the authorizer on and 1,000 ACLs versus off.

    python -m exactly.bench.acls [--records N] [--producers P] [--rounds R]   (or `exactly bench acls`)

Two brokers in one run: one without an authorizer, one with `StandardAuthorizer` and 1,000 ACLs (the
producer's own WRITE and IDEMPOTENT_WRITE among literal, prefixed and wildcard-principal ACLs of other
users and topics, some of which apply to the benchmark topic). The same produce workload as
`exactly bench broker` (1 KiB records, 6 partitions, acks=all, idempotent) runs R times on each, the two
alternating, and the medians are compared: ratio = on / off (the issue's target: >= 0.95).

The authorizer-on broker takes each request's principal from its client id
(`exactly.debug.principal.by.client.id`), since PLAINTEXT connections are all User:ANONYMOUS; the
producers' librdkafka client id is `rdkafka`. Also printed: the cost of one `authorize` call with
those 1,000 ACLs, in process.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from exactly.bench.broker import PARTITIONS, TOPIC, produce
from exactly.security.acls import AccessControlEntry, AclBinding, PatternType, PermissionType, ResourcePattern
from exactly.security.authorizer import Authorizer
from exactly.security.operations import AclOperation, ResourceType
from exactly.security.principal import KafkaPrincipal
from exactly.verify.processes import BrokerProcess

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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="exactly authorization overhead benchmark")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--acls", type=int, default=1000)
    args = parser.parse_args(argv)

    acls = bench_acls(args.acls)
    print(f"authorize(): {check_cost_us(acls):.2f} us per check with {len(acls)} ACLs (in process)")
    with tempfile.TemporaryDirectory(prefix="exactly-bench-acls-") as tmp:
        off = BrokerProcess(Path(tmp) / "off" / "data")
        on = BrokerProcess(
            Path(tmp) / "on" / "data",
            f"authorizer.class.name={AUTHORIZER}",
            f"super.users=User:{ADMIN}",
            "exactly.debug.principal.by.client.id=true",
        )
        for proc in (off, on):
            proc.data_dir.parent.mkdir(parents=True, exist_ok=True)
        with off.start(), on.start():
            _prepare(off.bootstrap, None)
            _prepare(on.bootstrap, acls)
            for proc in (off, on):  # warm-up (page cache, first segments, interpreter): not counted
                produce(proc.bootstrap, max(args.records // 5, args.producers), args.producers)
            rates: dict[str, list[float]] = {"off": [], "on": []}
            for round_ in range(args.rounds):
                for name, proc in (
                    (("off", off), ("on", on)) if round_ % 2 == 0 else (("on", on), ("off", off))
                ):
                    run = produce(proc.bootstrap, args.records, args.producers)
                    if run.records != args.records // args.producers * args.producers:
                        raise SystemExit(f"{name}: only {run.records} records delivered")
                    rates[name].append(run.mb_s)
                    print(f"round {round_ + 1} authorizer {name:3}: {run.mb_s:8.1f} MB/s")
            off_mb, on_mb = statistics.median(rates["off"]), statistics.median(rates["on"])
            print(
                f"produce, median of {args.rounds}: off {off_mb:.1f} MB/s, on with {len(acls)} ACLs "
                f"{on_mb:.1f} MB/s, ratio {on_mb / off_mb:.3f} (target >= 0.95)"
            )


if __name__ == "__main__":
    main()
