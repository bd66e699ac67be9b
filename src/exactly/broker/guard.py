"""Authorization of requests: what handlers call (the rules are exactly.security.rules' table).

With no authorizer configured (`authorizer.class.name` empty) everything is allowed and nothing is
logged. Each denial logs one line on `exactly.security.audit`:

    DENIED User:bob from 127.0.0.1: WRITE on TOPIC 'orders' (PRODUCE v9)
"""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.errors import KafkaError
from exactly.protocol.messages import ApiKey
from exactly.security.authorizer import audit
from exactly.security.operations import AclOperation, ResourceType, authorized_operations
from exactly.security.rules import Need, need

CLUSTER = "kafka-cluster"


def host(ctx: RequestContext) -> str:
    return ctx.peer.rpartition(":")[0] or ctx.peer


def enabled(ctx: RequestContext) -> bool:
    return ctx.broker.authorizer is not None


def permits(ctx: RequestContext, rule: Need, name: str, *, log_denial: bool = True) -> bool:
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return True
    if authorizer.authorize(ctx.principal, host(ctx), rule.operation, rule.resource_type, name):
        return True
    if log_denial:
        audit.info(
            "DENIED %s from %s: %s on %s %r (%s v%d)",
            ctx.principal,
            host(ctx),
            rule.operation.name,
            rule.resource_type.name,
            name,
            ApiKey(ctx.header.api_key).name,
            ctx.version,
        )
    return False


def allowed(ctx: RequestContext, api: ApiKey, role: str, name: str = CLUSTER) -> bool:
    """Whether the request's principal has what `RULES[api][role]` says on resource `name`."""
    return permits(ctx, need(api, role), name)


def quietly(ctx: RequestContext, api: ApiKey, role: str, name: str = CLUSTER) -> bool:
    """As `allowed`, without an audit line (a first of two alternatives, or a listing's filter)."""
    return permits(ctx, need(api, role), name, log_denial=False)


def by_resource_type(ctx: RequestContext, api: ApiKey, role: str) -> bool:
    """Whether the principal has `RULES[api][role]` on some resource of its type."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return True
    rule = need(api, role)
    return authorizer.authorize_by_resource_type(ctx.principal, host(ctx), rule.operation, rule.resource_type)


def deny_line(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType, name: str) -> None:
    audit.info(
        "DENIED %s from %s: %s on %s %r (%s v%d)",
        ctx.principal,
        host(ctx),
        operation.name,
        resource_type.name,
        name,
        ApiKey(ctx.header.api_key).name,
        ctx.version,
    )


def check_config_resource(ctx: RequestContext, api: ApiKey, resource_type: int, name: str) -> None:
    """DescribeConfigs / (Incremental)AlterConfigs: a topic needs its rule's "topic" Need, a broker (4) or
    broker logger (8) the "broker" Need on the cluster; KafkaError with the rule's code otherwise."""
    if resource_type == 2:
        rule = need(api, "topic")
    elif resource_type in (4, 8):
        rule, name = need(api, "broker"), CLUSTER
    else:
        return
    if not permits(ctx, rule, name):
        raise KafkaError(rule.error, "Authorization failed.")


def batch_refused(ctx: RequestContext, api: ApiKey, query_id: str, batch_id: int, named: list[str]) -> bool:
    """CommitBatch / AbortBatch (the two-phase commit extension): TRANSACTIONAL_ID WRITE on every id the
    request decides (its prepared transactions of the batch, and the winners it names); True if one lacks."""
    if ctx.broker.authorizer is None:
        return False
    coordinator = ctx.broker.transactions.coordinator
    ids = set(named)
    for txn in coordinator.list_prepared(query_id):
        if txn.prepared is not None and txn.prepared.batch_id == batch_id:
            ids.add(txn.transactional_id)
    return not all(allowed(ctx, api, "transactional_id", txn_id) for txn_id in sorted(ids))


def operations_field(ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    """The "authorized operations" bit field of a resource for this request's principal."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return authorized_operations(resource_type)
    return authorizer.authorized_operations(ctx.principal, host(ctx), resource_type, name)
