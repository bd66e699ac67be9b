"""`exactly acls add|remove|list`: ACL administration through confluent-kafka's AdminClient (CreateAcls,
DeleteAcls, DescribeAcls), like Kafka's `kafka-acls.sh`:

    exactly acls add --allow-principal User:alice --operation Read --topic orders --group billing
    exactly acls add --allow-principal User:etl --operation Write --topic logs- \\
        --resource-pattern-type prefixed
    exactly acls add --allow-principal User:app --operation Write --transactional-id app-
    exactly acls add --allow-principal User:ops --operation Alter --cluster
    exactly acls remove --allow-principal User:alice --operation Read --topic orders
    exactly acls list [--topic orders] [--principal User:alice] [--resource-pattern-type match]

Operations are Kafka's names, any case, with or without underscores (Read, IdempotentWrite,
DESCRIBE_CONFIGS, All). Without `--operation`, add needs one and remove/list mean any. `remove` without a
principal removes every ACL of the resources given. `--command-config KEY=VALUE` passes client settings
(client.id, security.protocol, sasl.*) as `kafka-acls.sh --command-config` does with a file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from exactly.cli.common import (
    AdminSession,
    BootstrapOption,
    CliError,
    fail,
    kafka_error_text,
    parse_key_values,
    print_table,
    reported_errors,
)

if TYPE_CHECKING:
    import concurrent.futures

__all__ = ["acls_app"]

acls_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Add, remove and list ACLs (like kafka-acls.sh).",
)

PrincipalOpt = Annotated[list[str] | None, typer.Option(help="User:NAME (repeatable)", show_default=False)]
HostOpt = Annotated[list[str] | None, typer.Option(help="host (repeatable; default *)", show_default=False)]
OperationOpt = Annotated[
    list[str] | None,
    typer.Option("--operation", help="Read, Write, All, ... (repeatable)", show_default=False),
]
TopicOpt = Annotated[list[str] | None, typer.Option("--topic", help="topic (repeatable)", show_default=False)]
GroupOpt = Annotated[list[str] | None, typer.Option("--group", help="group (repeatable)", show_default=False)]
TxnOpt = Annotated[
    list[str] | None,
    typer.Option("--transactional-id", help="transactional id (repeatable)", show_default=False),
]
ClusterOpt = Annotated[bool, typer.Option("--cluster", help="the cluster resource")]
PatternOpt = Annotated[
    str,
    typer.Option(
        "--resource-pattern-type", help="literal | prefixed (list/remove also: any, match)", show_default=True
    ),
]
ConfigOpt = Annotated[
    list[str] | None,
    typer.Option("--command-config", "-X", help="client setting KEY=VALUE (repeatable)", show_default=False),
]


class _Admin(AdminSession):
    def wait(self, future: concurrent.futures.Future[Any], what: str) -> Any:
        from confluent_kafka import KafkaError, KafkaException

        try:
            return super().wait(future, what)
        except KafkaException as e:
            err = e.args[0] if e.args else None
            if isinstance(err, KafkaError):
                raise CliError(f"{what}: {kafka_error_text(err)}") from None
            raise


def _kafka() -> Any:
    """confluent-kafka's ACL types (its admin package does not re-export them for type checkers)."""
    from confluent_kafka.admin import _acl, _resource

    class Types:
        AclOperation = _acl.AclOperation
        AclPermissionType = _acl.AclPermissionType
        AclBinding = _acl.AclBinding
        AclBindingFilter = _acl.AclBindingFilter
        ResourceType = _resource.ResourceType
        ResourcePatternType = _resource.ResourcePatternType

    return Types


def _norm(text: str) -> str:
    return text.replace("_", "").replace("-", "").lower()


def _operation(name: str) -> Any:
    AclOperation = _kafka().AclOperation

    for op in AclOperation:
        if op.name not in ("UNKNOWN", "ANY") and _norm(op.name) == _norm(name):
            return op
    known = ", ".join(
        op.name.title().replace("_", "") for op in AclOperation if op.name not in ("UNKNOWN", "ANY")
    )
    fail(f"unknown operation {name!r} (known: {known})")


def _pattern(name: str, filtering: bool) -> Any:
    ResourcePatternType = _kafka().ResourcePatternType

    allowed = ("literal", "prefixed", "any", "match") if filtering else ("literal", "prefixed")
    if name.lower() not in allowed:
        fail(f"--resource-pattern-type must be one of {', '.join(allowed)}, got {name!r}")
    return ResourcePatternType[name.upper()]


def _resources(
    topics: list[str] | None, groups: list[str] | None, txns: list[str] | None, cluster: bool
) -> list[tuple[Any, str]]:
    ResourceType = _kafka().ResourceType

    out = [(ResourceType.TOPIC, t) for t in topics or []]
    out += [(ResourceType.GROUP, g) for g in groups or []]
    out += [(ResourceType.TRANSACTIONAL_ID, x) for x in txns or []]
    if cluster:
        out.append((ResourceType.BROKER, "kafka-cluster"))  # confluent-kafka's name of Kafka's CLUSTER
    return out


def _entries(
    allow: list[str] | None,
    deny: list[str] | None,
    allow_hosts: list[str] | None,
    deny_hosts: list[str] | None,
) -> list[tuple[str, str, Any]]:
    AclPermissionType = _kafka().AclPermissionType

    out: list[tuple[str, str, Any]] = []
    for principals, hosts, permission in (
        (allow, allow_hosts, AclPermissionType.ALLOW),
        (deny, deny_hosts, AclPermissionType.DENY),
    ):
        for principal in principals or []:
            if ":" not in principal:
                fail(f"a principal is TYPE:NAME (User:alice), got {principal!r}")
            out += [(principal, host, permission) for host in hosts or ["*"]]
    return out


@acls_app.command()
def add(
    ctx: typer.Context,
    allow_principal: PrincipalOpt = None,
    deny_principal: PrincipalOpt = None,
    allow_host: HostOpt = None,
    deny_host: HostOpt = None,
    operations: OperationOpt = None,
    topics: TopicOpt = None,
    groups: GroupOpt = None,
    transactional_ids: TxnOpt = None,
    cluster: ClusterOpt = False,
    resource_pattern_type: PatternOpt = "literal",
    command_config: ConfigOpt = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Add ACLs: every principal x host x operation on every resource given."""
    AclBinding = _kafka().AclBinding

    with reported_errors():
        resources = _resources(topics, groups, transactional_ids, cluster)
        entries = _entries(allow_principal, deny_principal, allow_host, deny_host)
        if not resources:
            fail("give a resource: --topic, --group, --transactional-id or --cluster")
        if not entries:
            fail("give --allow-principal or --deny-principal")
        if not operations:
            fail("give --operation")
        pattern = _pattern(resource_pattern_type, filtering=False)
        ops = [_operation(op) for op in operations]
        bindings = _bindings(AclBinding, resources, entries, ops, pattern)
        admin = _Admin(ctx, bootstrap, parse_key_values(command_config, "client setting"))
        for binding, future in admin.client.create_acls(bindings, request_timeout=admin.timeout).items():
            admin.wait(future, f"cannot add {_text(binding)}")
            typer.echo(f"added {_text(binding)}")


def _bindings(
    make: Any,
    resources: Sequence[tuple[Any, str | None]],
    entries: Sequence[tuple[str | None, str | None, Any]],
    operations: list[Any],
    pattern: Any,
) -> list[Any]:
    """Every resource x (principal, host, permission) x operation as `make`: AclBinding (add) or
    AclBindingFilter (remove)."""
    return [
        make(rtype, name, pattern, principal, host, op, permission)
        for rtype, name in resources
        for principal, host, permission in entries
        for op in operations
    ]


@acls_app.command()
def remove(
    ctx: typer.Context,
    allow_principal: PrincipalOpt = None,
    deny_principal: PrincipalOpt = None,
    allow_host: HostOpt = None,
    deny_host: HostOpt = None,
    operations: OperationOpt = None,
    topics: TopicOpt = None,
    groups: GroupOpt = None,
    transactional_ids: TxnOpt = None,
    cluster: ClusterOpt = False,
    resource_pattern_type: PatternOpt = "literal",
    command_config: ConfigOpt = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Remove the ACLs that match (no principal: every ACL of the resources given)."""
    kafka = _kafka()

    with reported_errors():
        resources: list[tuple[Any, str | None]] = list(_resources(topics, groups, transactional_ids, cluster))
        if not resources:
            fail("give a resource: --topic, --group, --transactional-id or --cluster")
        principals: list[tuple[str | None, str | None, Any]] = list(
            _entries(allow_principal, deny_principal, allow_host, deny_host)
        ) or [(None, None, kafka.AclPermissionType.ANY)]
        pattern = _pattern(resource_pattern_type, filtering=True)
        admin = _Admin(ctx, bootstrap, parse_key_values(command_config, "client setting"))
        ops = [_operation(op) for op in operations] if operations else [kafka.AclOperation.ANY]
        filters = _bindings(kafka.AclBindingFilter, resources, principals, ops, pattern)
        removed = 0
        for future in admin.client.delete_acls(filters, request_timeout=admin.timeout).values():
            for binding in admin.wait(future, "cannot remove ACLs"):
                typer.echo(f"removed {_text(binding)}")
                removed += 1
        if removed == 0:
            typer.echo("no ACL matched")


@acls_app.command("list")
def list_(
    ctx: typer.Context,
    principal: Annotated[str | None, typer.Option(help="only this principal")] = None,
    topics: TopicOpt = None,
    groups: GroupOpt = None,
    transactional_ids: TxnOpt = None,
    cluster: ClusterOpt = False,
    resource_pattern_type: PatternOpt = "any",
    command_config: ConfigOpt = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """List ACLs (of the resources given, else all)."""
    kafka = _kafka()

    with reported_errors():
        resources: list[tuple[Any, str | None]] = list(_resources(topics, groups, transactional_ids, cluster))
        resources = resources or [(kafka.ResourceType.ANY, None)]
        pattern = _pattern(resource_pattern_type, filtering=True)
        admin = _Admin(ctx, bootstrap, parse_key_values(command_config, "client setting"))
        found: dict[str, list[str]] = {}
        anyone = [(principal, None, kafka.AclPermissionType.ANY)]
        for acl_filter in _bindings(
            kafka.AclBindingFilter, resources, anyone, [kafka.AclOperation.ANY], pattern
        ):
            for b in admin.wait(
                admin.client.describe_acls(acl_filter, request_timeout=admin.timeout), "cannot list ACLs"
            ):
                row = [
                    _resource_type(b.restype),
                    b.name,
                    b.resource_pattern_type.name,
                    b.principal,
                    b.host,
                    b.operation.name,
                    b.permission_type.name,
                ]
                found["\t".join(row)] = row
        if found:
            print_table(
                ["RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"],
                sorted(found.values()),
            )


def _resource_type(restype: Any) -> str:
    return "CLUSTER" if restype.name == "BROKER" else str(restype.name)


def _text(b: Any) -> str:
    return (
        f"{b.permission_type.name} {b.principal} from {b.host} {b.operation.name} on "
        f"{_resource_type(b.restype)}:{b.resource_pattern_type.name}:{b.name}"
    )
