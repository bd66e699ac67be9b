"""`exactly topics create|list|describe|delete|alter`: topic administration through confluent-kafka's
AdminClient (CreateTopics, Metadata, DescribeConfigs, ListOffsets, DeleteTopics, CreatePartitions,
IncrementalAlterConfigs)."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Annotated, Any

import typer

from exactly.cli.common import (
    AdminSession,
    BootstrapOption,
    CliError,
    fail,
    kafka_error_text,
    parse_key_values,
    reported_errors,
)

if TYPE_CHECKING:
    import concurrent.futures

    from confluent_kafka import KafkaError

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Create, list, describe, alter and delete topics.",
)


class _Admin(AdminSession):
    def topic_names(self) -> list[str]:
        metadata = self.session.call(
            lambda t: self.client.list_topics(timeout=t), self.client.poll, "listing topics"
        )
        return sorted(metadata.topics)


def _topic_error(err: KafkaError, topic: str, action: str) -> str:
    from confluent_kafka import KafkaError

    code = err.code()
    if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return f"topic {topic!r} does not exist"
    if code == KafkaError.TOPIC_ALREADY_EXISTS:
        return f"topic {topic!r} already exists"
    return f"cannot {action} topic {topic!r}: {kafka_error_text(err)}"


def _result(admin: _Admin, future: concurrent.futures.Future[Any], topic: str, action: str) -> Any:
    from confluent_kafka import KafkaError, KafkaException

    try:
        return admin.wait(future, f"{action} topic {topic!r}")
    except KafkaException as e:
        if e.args and isinstance(e.args[0], KafkaError):
            raise CliError(_topic_error(e.args[0], topic, action)) from None
        raise


def kafka_uuid(msb: int, lsb: int) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 of the 16 bytes, no padding."""
    raw = (msb & (2**64 - 1)).to_bytes(8, "big") + (lsb & (2**64 - 1)).to_bytes(8, "big")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# --- create -------------------------------------------------------------------------------------------


@app.command()
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="topic name")],
    partitions: Annotated[
        int | None, typer.Option("--partitions", "-p", help="partition count (default: the broker's)")
    ] = None,
    replication_factor: Annotated[
        int | None, typer.Option("--replication-factor", "-r", help="replicas (default: the broker's)")
    ] = None,
    config: Annotated[
        list[str] | None, typer.Option("--config", "-c", help="KEY=VALUE topic config; repeatable")
    ] = None,
    if_not_exists: Annotated[
        bool, typer.Option("--if-not-exists", help="succeed quietly when the topic exists")
    ] = False,
    bootstrap: BootstrapOption = None,
) -> None:
    """Create a topic."""
    with reported_errors():
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

        configs = parse_key_values(config)
        if partitions is not None and partitions < 1:
            fail(f"--partitions must be at least 1, not {partitions}", 2)
        admin = _Admin(ctx, bootstrap)
        topic = NewTopic(
            name,
            num_partitions=-1 if partitions is None else partitions,
            replication_factor=-1 if replication_factor is None else replication_factor,
            config=configs,
        )
        futures = admin.client.create_topics(
            [topic], operation_timeout=admin.timeout, request_timeout=admin.timeout
        )
        try:
            admin.wait(futures[name], f"creating topic {name!r}")
        except KafkaException as e:
            err = e.args[0] if e.args else None
            if not isinstance(err, KafkaError):
                raise
            if if_not_exists and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            fail(_topic_error(err, name, "create"))
        count = _partition_count(admin, name)
        typer.echo(f"created topic {name!r} with {count} partition{'s' if count != 1 else ''}")


def _partition_count(admin: _Admin, name: str) -> int:
    metadata = admin.session.call(
        lambda t: admin.client.list_topics(name, timeout=t), admin.client.poll, "metadata"
    )
    topic = metadata.topics.get(name)
    return len(topic.partitions) if topic is not None else 0


# --- list ---------------------------------------------------------------------------------------------


@app.command("list")
def list_(ctx: typer.Context, bootstrap: BootstrapOption = None) -> None:
    """List topic names, one per line."""
    with reported_errors():
        admin = _Admin(ctx, bootstrap)
        for name in admin.topic_names():
            typer.echo(name)


# --- describe -----------------------------------------------------------------------------------------


@app.command()
def describe(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="topic name")],
    bootstrap: BootstrapOption = None,
) -> None:
    """Show a topic's id, partitions (leader, replicas, offsets) and every config with its source."""
    with reported_errors():
        from confluent_kafka import TopicCollection, TopicPartition
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            ConfigResource,
            ConfigSource,
            OffsetSpec,
            ResourceType,
        )

        admin = _Admin(ctx, bootstrap)
        description = _result(
            admin,
            admin.client.describe_topics(TopicCollection([name]), request_timeout=admin.timeout)[name],
            name,
            "describe",
        )
        partitions = sorted(description.partitions, key=lambda p: p.id)
        topic_id = description.topic_id
        id_text = (
            kafka_uuid(topic_id.get_most_significant_bits(), topic_id.get_least_significant_bits())
            if topic_id is not None
            else "-"
        )

        # log start offsets and high watermarks
        offsets: dict[tuple[int, str], int] = {}
        if partitions:
            earliest = admin.client.list_offsets(
                {TopicPartition(name, p.id): OffsetSpec.earliest() for p in partitions},  # type: ignore[no-untyped-call]
                request_timeout=admin.timeout,
            )
            latest = admin.client.list_offsets(
                {TopicPartition(name, p.id): OffsetSpec.latest() for p in partitions},  # type: ignore[no-untyped-call]
                request_timeout=admin.timeout,
            )
            for kind, futures in (("start", earliest), ("end", latest)):
                for tp, future in futures.items():
                    offsets[(tp.partition, kind)] = _result(admin, future, name, "describe").offset

        resource = ConfigResource(ResourceType.TOPIC, name)
        configs = _result(
            admin,
            admin.client.describe_configs([resource], request_timeout=admin.timeout)[resource],
            name,
            "describe",
        )

        replication = len(partitions[0].replicas) if partitions else 0
        typer.echo(
            f"Topic: {name}\tTopicId: {id_text}\tPartitionCount: {len(partitions)}\t"
            f"ReplicationFactor: {replication}\tInternal: {str(bool(description.is_internal)).lower()}"
        )
        for p in partitions:
            leader = p.leader.id if p.leader is not None else "none"
            replicas = ",".join(str(r.id) for r in p.replicas)
            isr = ",".join(str(r.id) for r in p.isr)
            typer.echo(
                f"\tPartition: {p.id}\tLeader: {leader}\tReplicas: {replicas}\tIsr: {isr}\t"
                f"StartOffset: {offsets.get((p.id, 'start'), '?')}\t"
                f"EndOffset: {offsets.get((p.id, 'end'), '?')}"
            )
        typer.echo("Configs:")
        entries = sorted(configs.values(), key=lambda e: e.name)
        width = max((len(e.name) + len(_config_value(e)) + 1 for e in entries), default=0)
        for entry in entries:
            try:
                source = ConfigSource(entry.source).name
            except ValueError:
                source = f"SOURCE_{entry.source}"
            pair = f"{entry.name}={_config_value(entry)}"
            typer.echo(f"\t{pair:<{width}}  {source}")


def _config_value(entry: Any) -> str:
    if entry.is_sensitive:
        return "(sensitive)"
    return "null" if entry.value is None else str(entry.value)


# --- delete -------------------------------------------------------------------------------------------


@app.command()
def delete(
    ctx: typer.Context,
    names: Annotated[list[str], typer.Argument(help="topic name(s)", show_default=False)],
    if_exists: Annotated[bool, typer.Option("--if-exists", help="succeed quietly when missing")] = False,
    bootstrap: BootstrapOption = None,
) -> None:
    """Delete topics."""
    with reported_errors():
        from confluent_kafka import KafkaError, KafkaException

        admin = _Admin(ctx, bootstrap)
        futures = admin.client.delete_topics(
            list(names), operation_timeout=admin.timeout, request_timeout=admin.timeout
        )
        failures: list[str] = []
        for name in names:
            try:
                admin.wait(futures[name], f"deleting topic {name!r}")
            except KafkaException as e:
                err = e.args[0] if e.args else None
                if not isinstance(err, KafkaError):
                    raise
                if if_exists and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                failures.append(_topic_error(err, name, "delete"))
                continue
            typer.echo(f"deleted topic {name!r}")
        if failures:
            fail("; ".join(failures))


# --- alter --------------------------------------------------------------------------------------------


@app.command()
def alter(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="topic name")],
    set_: Annotated[
        list[str] | None, typer.Option("--set", "-s", help="KEY=VALUE config to set; repeatable")
    ] = None,
    delete_: Annotated[
        list[str] | None,
        typer.Option("--delete", "-d", help="config KEY to reset to its default; repeatable"),
    ] = None,
    partitions: Annotated[
        int | None, typer.Option("--partitions", "-p", help="grow the topic to this many partitions")
    ] = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Change a topic's configs (IncrementalAlterConfigs) or grow its partition count."""
    with reported_errors():
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            NewPartitions,
            ResourceType,
        )

        to_set = parse_key_values(set_)
        to_delete = [key.strip() for key in delete_ or []]
        if not to_set and not to_delete and partitions is None:
            fail("nothing to alter: give --set KEY=VALUE, --delete KEY or --partitions N", 2)
        if any(not key for key in to_delete):
            fail("--delete needs a config name", 2)
        both = sorted(set(to_set) & set(to_delete))
        if both:
            fail(f"config {both[0]!r} is both set and deleted", 2)
        admin = _Admin(ctx, bootstrap)
        done: list[str] = []
        if to_set or to_delete:
            entries = [
                ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
                for key, value in to_set.items()
            ] + [ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE) for key in to_delete]
            resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
            altered = admin.client.incremental_alter_configs([resource], request_timeout=admin.timeout)
            _result(admin, altered[resource], name, "alter")
            done += [f"set {key}={value}" for key, value in to_set.items()]
            done += [f"deleted {key}" for key in to_delete]
        if partitions is not None:
            grown = admin.client.create_partitions(
                [NewPartitions(name, partitions)],
                operation_timeout=admin.timeout,
                request_timeout=admin.timeout,
            )
            _result(admin, grown[name], name, "alter")
            done.append(f"partitions={partitions}")
        typer.echo(f"altered topic {name!r}: {', '.join(done)}")
