"""`exactly topics elect-leaders` (as `kafka-leader-election.sh`) and `exactly topics reassign
generate|execute|verify` (as `kafka-reassign-partitions.sh`).

Elections go through confluent-kafka's AdminClient (ElectLeaders); reassignments through kafka-python's
(AlterPartitionReassignments, ListPartitionReassignments), which confluent-kafka's lacks. Both APIs are
answered by the cluster's controller.

The files are Kafka's:

    topics to move:  {"version": 1, "topics": [{"topic": "orders"}]}
    reassignment:    {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [2, 3],
                      "log_dirs": ["any", "any"]}]}
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Annotated, Any

import typer

from exactly.cli.common import (
    AdminSession,
    BootstrapOption,
    fail,
    kafka_error_text,
    kafka_python_admin,
    reported_errors,
)
from exactly.cluster.assignment import BrokerMetadata, assign_replicas

Assignment = dict[tuple[str, int], list[int]]


def elect_leaders(
    ctx: typer.Context,
    election_type: Annotated[
        str, typer.Option("--election-type", help="preferred or unclean", show_default=True)
    ] = "preferred",
    topic: Annotated[str | None, typer.Option("--topic", help="the topic (default: every partition)")] = None,
    partition: Annotated[int | None, typer.Option("--partition", help="one partition of --topic")] = None,
    all_topic_partitions: Annotated[
        bool, typer.Option("--all-topic-partitions", help="every partition of every topic")
    ] = False,
    bootstrap: BootstrapOption = None,
) -> None:
    """Elect partition leaders: the preferred replica, or (unclean) any live replica of a partition
    without a leader."""
    with reported_errors():
        from confluent_kafka import ElectionType, KafkaError, TopicPartition

        kind = {"preferred": ElectionType.PREFERRED, "unclean": ElectionType.UNCLEAN}.get(
            election_type.lower()
        )
        if kind is None:
            fail(f"--election-type must be preferred or unclean, not {election_type!r}")
        if partition is not None and topic is None:
            fail("--partition needs --topic")
        if topic is None and not all_topic_partitions:
            fail("name a --topic or give --all-topic-partitions")
        admin = AdminSession(ctx, bootstrap)
        wanted: list[Any] | None = None
        if topic is not None:
            if partition is not None:
                wanted = [TopicPartition(topic, partition)]
            else:
                metadata = admin.session.call(
                    lambda t: admin.client.list_topics(topic, timeout=t),
                    admin.client.poll,
                    "reading metadata",
                )
                found = metadata.topics.get(topic)
                if found is None or found.error is not None:
                    fail(f"topic {topic!r} does not exist")
                wanted = [TopicPartition(topic, p) for p in sorted(found.partitions)]
        results = admin.wait(admin.client.elect_leaders(kind, wanted), "electing leaders")
        elected, not_needed, failed = [], [], []
        for tp, error in sorted(results.items(), key=lambda item: (item[0].topic, item[0].partition)):
            name = f"{tp.topic}-{tp.partition}"
            if error is None:
                elected.append(name)
            elif error.code() == KafkaError.ELECTION_NOT_NEEDED:
                not_needed.append(name)
            else:
                failed.append(f"{name} ({kafka_error_text(error)})")
        kind_name = election_type.upper()
        if elected:
            typer.echo(
                f"Successfully completed leader election ({kind_name}) for partitions {', '.join(elected)}"
            )
        if not_needed:
            typer.echo(f"Valid replica already elected for partitions {', '.join(not_needed)}")
        if not elected and not not_needed and not failed:
            typer.echo("No partition needed an election")
        if failed:
            fail(f"leader election failed for partitions {', '.join(failed)}")


reassign_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Move partitions to other brokers (kafka-reassign-partitions.sh: generate, execute, verify).",
)


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as e:
        fail(f"cannot read {what} {path}: {e.strerror or e}")
    except ValueError as e:
        fail(f"{path} is not valid JSON: {e}")


def parse_reassignment(data: Any) -> Assignment:
    """Kafka's reassignment JSON -> {(topic, partition): replicas} (ValueError: one readable line)."""
    if not isinstance(data, dict) or not isinstance(data.get("partitions"), list):
        raise ValueError('expected {"version": 1, "partitions": [...]}')
    out: Assignment = {}
    for entry in data["partitions"]:
        if not isinstance(entry, dict):
            raise ValueError("each partition entry must be an object")
        topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if not isinstance(topic, str) or not isinstance(partition, int) or isinstance(partition, bool):
            raise ValueError(f"a partition entry needs a topic and a partition number: {entry}")
        if not isinstance(replicas, list) or not all(isinstance(r, int) for r in replicas) or not replicas:
            raise ValueError(f"{topic}-{partition}: replicas must be a non-empty list of broker ids")
        if len(set(replicas)) != len(replicas):
            raise ValueError(f"{topic}-{partition}: a broker appears twice in {replicas}")
        if (topic, partition) in out:
            raise ValueError(f"{topic}-{partition} appears twice")
        out[(topic, partition)] = list(replicas)
    return out


def format_reassignment(assignment: Assignment) -> str:
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
                for (t, p), r in sorted(assignment.items())
            ],
        }
    )


def _current(admin: AdminSession, topics: list[str] | None) -> tuple[Assignment, dict[int, str | None]]:
    """Each partition's replicas and the brokers, from Metadata (racks are not in confluent-kafka's
    metadata: a proposal is rack-unaware, as kafka-reassign-partitions without --disable-rack-aware on
    brokers without racks)."""
    metadata = admin.session.call(
        lambda t: admin.client.list_topics(timeout=t), admin.client.poll, "reading metadata"
    )
    current: Assignment = {}
    for name, topic in metadata.topics.items():
        if topics is not None and name not in topics:
            continue
        for p, info in topic.partitions.items():
            current[(name, p)] = list(info.replicas)
    racks = dict.fromkeys(metadata.brokers)
    return current, racks


@reassign_app.command()
def generate(
    ctx: typer.Context,
    topics_to_move_json_file: Annotated[
        Path, typer.Option("--topics-to-move-json-file", help='{"version":1,"topics":[{"topic":"t"}]}')
    ],
    broker_list: Annotated[str, typer.Option("--broker-list", help="the brokers to move to: 1,2,3")],
    bootstrap: BootstrapOption = None,
) -> None:
    """Propose an assignment of the named topics over the given brokers (nothing is changed)."""
    with reported_errors():
        data = _read_json(topics_to_move_json_file, "topics file")
        if not isinstance(data, dict) or not isinstance(data.get("topics"), list):
            fail('the topics file must be {"version": 1, "topics": [{"topic": "..."}]}')
        named = [t.get("topic") for t in data["topics"] if isinstance(t, dict)]
        names = [n for n in named if isinstance(n, str)]
        if not names or len(names) != len(data["topics"]):
            fail('the topics file must name each topic: {"topic": "..."}')
        try:
            brokers = sorted({int(b) for b in broker_list.split(",") if b.strip()})
        except ValueError:
            fail(f"--broker-list must be broker ids separated by commas, not {broker_list!r}")
        admin = AdminSession(ctx, bootstrap)
        current, _ = _current(admin, names)
        missing = sorted(set(names) - {t for t, _ in current})
        if missing:
            fail(f"topics {', '.join(missing)} do not exist")
        proposed: Assignment = {}
        rng = random.Random()
        for name in names:
            partitions = sorted(p for t, p in current if t == name)
            rf = len(current[(name, partitions[0])])
            try:
                plan = assign_replicas(
                    [BrokerMetadata(b, None) for b in brokers], len(partitions), rf, rng=rng
                )
            except Exception as e:  # noqa: BLE001 (KafkaError: RF above the broker count, ...)
                fail(f"cannot assign {name!r} over brokers {brokers}: {e}")
            for p in partitions:
                proposed[(name, p)] = list(plan[p])
        typer.echo("Current partition replica assignment")
        typer.echo(format_reassignment(current))
        typer.echo("")
        typer.echo("Proposed partition reassignment configuration")
        typer.echo(format_reassignment(proposed))


@reassign_app.command()
def execute(
    ctx: typer.Context,
    reassignment_json_file: Annotated[
        Path, typer.Option("--reassignment-json-file", help="the target assignment")
    ],
    bootstrap: BootstrapOption = None,
) -> None:
    """Start moving the partitions to the replicas the file names."""
    with reported_errors():
        from kafka import TopicPartition

        try:
            target = parse_reassignment(_read_json(reassignment_json_file, "reassignment file"))
        except ValueError as e:
            fail(f"{reassignment_json_file}: {e}")
        admin = AdminSession(ctx, bootstrap)
        current, _ = _current(admin, sorted({t for t, _ in target}))
        unknown = sorted(f"{t}-{p}" for t, p in target if (t, p) not in current)
        if unknown:
            fail(f"partitions {', '.join(unknown)} do not exist")
        typer.echo("Current partition replica assignment")
        typer.echo(format_reassignment({key: current[key] for key in target}))
        typer.echo("")
        typer.echo("Save this to use as the --reassignment-json-file option during rollback")
        kafka_admin = kafka_python_admin(ctx, bootstrap)
        try:
            answer = kafka_admin.alter_partition_reassignments(
                {TopicPartition(t, p): replicas for (t, p), replicas in target.items()}
            )
        finally:
            kafka_admin.close()
        failed = [
            f"{tp.topic}-{tp.partition} ({error.__name__})"
            for tp, error in answer.items()
            if error is not None
        ]
        if failed:
            fail(f"the reassignment was refused for {', '.join(sorted(failed))}")
        started = ", ".join(f"{t}-{p}" for t, p in sorted(target))
        typer.echo(f"Successfully started partition reassignments for {started}")


@reassign_app.command()
def verify(
    ctx: typer.Context,
    reassignment_json_file: Annotated[
        Path, typer.Option("--reassignment-json-file", help="the target assignment")
    ],
    bootstrap: BootstrapOption = None,
) -> None:
    """Whether each partition's reassignment has completed (exit 1 while any is still in progress or
    ended elsewhere than the file says)."""
    with reported_errors():
        try:
            target = parse_reassignment(_read_json(reassignment_json_file, "reassignment file"))
        except ValueError as e:
            fail(f"{reassignment_json_file}: {e}")
        kafka_admin = kafka_python_admin(ctx, bootstrap)
        try:
            ongoing = kafka_admin.list_partition_reassignments()
        finally:
            kafka_admin.close()
        moving = {(tp.topic, tp.partition) for tp in ongoing}
        current, _ = _current(AdminSession(ctx, bootstrap), sorted({t for t, _ in target}))
        typer.echo("Status of partition reassignment:")
        pending = False
        for (t, p), replicas in sorted(target.items()):
            if (t, p) in moving:
                typer.echo(f"Reassignment of partition {t}-{p} is still in progress.")
                pending = True
            elif current.get((t, p)) == replicas:
                typer.echo(f"Reassignment of partition {t}-{p} is completed.")
            else:
                typer.echo(
                    f"There is no active reassignment of partition {t}-{p}, but replica set is "
                    f"{current.get((t, p))} rather than {replicas}."
                )
                pending = True
        if pending:
            raise typer.Exit(1)
