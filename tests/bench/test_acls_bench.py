"""The ACL set of `exactly bench acls`: 1,000 distinct bindings, the producer allowed, others not."""

from __future__ import annotations

from exactly.bench.acls import PRODUCER, bench_acls, check_cost_us
from exactly.bench.broker import TOPIC
from exactly.security.authorizer import Authorizer
from exactly.security.operations import AclOperation, ResourceType
from exactly.security.principal import KafkaPrincipal


def test_bench_acls() -> None:
    acls = bench_acls(1000)
    assert len(set(acls)) == 1000
    authorizer = Authorizer(acls=acls)
    producer = KafkaPrincipal.parse(PRODUCER)
    assert authorizer.authorize(producer, "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, TOPIC)
    assert authorizer.authorize(
        producer, "127.0.0.1", AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, "kafka-cluster"
    )
    assert not authorizer.authorize(producer, "127.0.0.1", AclOperation.READ, ResourceType.TOPIC, TOPIC)
    # a user whose DENY applies to the topic
    denied = next(a.entry.principal for a in acls if a.entry.permission.name == "DENY")
    assert not authorizer.authorize(
        KafkaPrincipal.parse(denied), "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, TOPIC
    )
    assert check_cost_us(acls, checks=1000) > 0
