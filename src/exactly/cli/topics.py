"""`exactly topics create|list|describe|delete|alter`: topic administration through confluent-kafka's
AdminClient (CreateTopics, Metadata, DescribeConfigs, ListOffsets, DeleteTopics, CreatePartitions,
IncrementalAlterConfigs)."""

from __future__ import annotations

import base64
import contextlib
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition as `describe` shows it."""

    topic: str
    partition: int
    leader: int  # -1: none
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]  # replicas on brokers the cluster does not list as live

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    def line(self, start: int | None = None, end: int | None = None) -> str:
        """kafka-topics' partition line (Offline only when some replica is), then the offsets if known."""
        leader = str(self.leader) if self.leader >= 0 else "none"
        text = (
            f"\tTopic: {self.topic}\tPartition: {self.partition}\tLeader: {leader}\t"
            f"Replicas: {_ids(self.replicas)}\tIsr: {_ids(self.isr)}"
        )
        if self.offline:
            text += f"\tOffline: {_ids(self.offline)}"
        if start is not None or end is not None:
            text += f"\tStartOffset: {_or_unknown(start)}\tEndOffset: {_or_unknown(end)}"
        return text


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(str(i) for i in ids)


def _or_unknown(value: int | None) -> str:
    return "?" if value is None else str(value)


@app.command()
def describe(
    ctx: typer.Context,
    names: Annotated[
        list[str] | None, typer.Argument(help="topic name(s); default: every topic", show_default=False)
    ] = None,
    under_replicated: Annotated[
        bool,
        typer.Option(
            "--under-replicated-partitions",
            help="only the partitions whose ISR is smaller than their replicas (no topic headers)",
        ),
    ] = False,
    config_sources: Annotated[
        bool, typer.Option("--config-sources", help="also every config of the topic with its source")
    ] = False,
    bootstrap: BootstrapOption = None,
) -> None:
    """Like kafka-topics --describe: per topic its id, partition count, replication factor and
    non-default configs, then per partition its leader, replicas, ISR, offline replicas and offsets."""
    with reported_errors():
        from confluent_kafka import TopicCollection
        from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

        admin = _Admin(ctx, bootstrap)
        metadata = admin.session.call(
            lambda t: admin.client.list_topics(timeout=t), admin.client.poll, "metadata"
        )
        live = set(metadata.brokers)
        topics = list(dict.fromkeys(names)) if names else sorted(metadata.topics)
        if not topics:
            return
        described = admin.client.describe_topics(TopicCollection(topics), request_timeout=admin.timeout)
        descriptions = {name: _result(admin, described[name], name, "describe") for name in topics}
        partitions = {
            name: [
                PartitionInfo(
                    topic=name,
                    partition=p.id,
                    leader=p.leader.id if p.leader is not None else -1,
                    replicas=tuple(r.id for r in p.replicas),
                    isr=tuple(r.id for r in p.isr),
                    offline=tuple(r.id for r in p.replicas if r.id not in live),
                )
                for p in sorted(description.partitions, key=lambda p: p.id)
            ]
            for name, description in descriptions.items()
        }

        if under_replicated:
            for name in topics:
                for info in partitions[name]:
                    if info.under_replicated:
                        typer.echo(info.line())
            return

        offsets = _offsets(admin, [(name, p.partition) for name in topics for p in partitions[name]])
        resources = {name: ConfigResource(ResourceType.TOPIC, name) for name in topics}
        config_futures = admin.client.describe_configs(
            list(resources.values()), request_timeout=admin.timeout
        )
        for name in topics:
            configs = _result(admin, config_futures[resources[name]], name, "describe")
            entries = sorted(configs.values(), key=lambda e: e.name)
            topic_id = descriptions[name].topic_id
            id_text = (
                kafka_uuid(topic_id.get_most_significant_bits(), topic_id.get_least_significant_bits())
                if topic_id is not None
                else "-"
            )
            infos = partitions[name]
            replication = len(infos[0].replicas) if infos else 0
            overrides = ",".join(
                f"{e.name}={_config_value(e)}" for e in entries if e.source != _DEFAULT_CONFIG
            )
            typer.echo(
                f"Topic: {name}\tTopicId: {id_text}\tPartitionCount: {len(infos)}\t"
                f"ReplicationFactor: {replication}\tConfigs: {overrides}"
            )
            for info in infos:
                start, end = offsets.get((name, info.partition), (None, None))
                typer.echo(info.line(start, end))
            if config_sources:
                _print_config_sources(entries)


_DEFAULT_CONFIG = 5  # ConfigSource.DEFAULT_CONFIG


def _offsets(
    admin: _Admin, partitions: list[tuple[str, int]]
) -> dict[tuple[str, int], tuple[int | None, int | None]]:
    """Each partition's log start offset and high watermark; None where the leader cannot say (an
    offline partition): the rest of the description still shows."""
    from confluent_kafka import KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    if not partitions:
        return {}
    found: dict[tuple[str, int], list[int | None]] = {tp: [None, None] for tp in partitions}
    for index, spec in enumerate((OffsetSpec.earliest(), OffsetSpec.latest())):  # type: ignore[no-untyped-call]
        futures = admin.client.list_offsets(
            {TopicPartition(topic, p): spec for topic, p in partitions}, request_timeout=admin.timeout
        )
        for tp, future in futures.items():
            with contextlib.suppress(KafkaException):  # offline: "?"
                found[(tp.topic, tp.partition)][index] = admin.wait(future, "listing offsets").offset
    return {tp: (start, end) for tp, (start, end) in found.items()}


def _print_config_sources(entries: list[Any]) -> None:
    from confluent_kafka.admin import ConfigSource  # type: ignore[attr-defined]

    typer.echo("Configs:")
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
