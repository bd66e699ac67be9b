"""`exactly groups list|describe|lag|reset-offsets|delete`: consumer group administration through
confluent-kafka's AdminClient (ListGroups, DescribeGroups, OffsetFetch, ListOffsets, OffsetCommit,
DeleteGroups), like Kafka's `kafka-consumer-groups.sh`.

Share groups (KIP-932; librdkafka's admin client has no share-group calls, so these go through
exactly's own protocol client to the group's coordinator): `list` shows every group's type (classic,
consumer or share); `describe` of a share group shows its members, their assignments and each share
partition's start offset (SPSO) with what is left to deliver or acknowledge behind the high watermark
(DescribeShareGroupOffsets); `reset-offsets` sets share partitions' start offsets
(AlterShareGroupOffsets) and `delete-offsets` forgets a share group's state for whole topics
(DeleteShareGroupOffsets), as `kafka-share-groups.sh --reset-offsets / --delete-offsets`: both only
while the group has no members.

`lag` compares each partition's committed offset with its high watermark (what a read_uncommitted
consumer can still read) and with its last stable offset (what a read_committed consumer can still
read: records of open transactions are not counted). `reset-offsets` only prints the plan unless
`--execute` is given, and only works on a group without active members, as in Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from exactly.cli.common import (
    AdminSession,
    BootstrapOption,
    CliError,
    fail,
    kafka_error_text,
    print_table,
    reported_errors,
)
from exactly.errors import ErrorCode

if TYPE_CHECKING:
    import concurrent.futures

__all__ = ["groups_app"]

groups_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="List, describe, show the lag of, reset or delete the offsets of and delete consumer and share "
    "groups.",
)

# librdkafka's ConsumerGroupState names -> Kafka's state names
_STATES = {
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "STABLE": "Stable",
    "EMPTY": "Empty",
    "DEAD": "Dead",
    "UNKNOWN": "Unknown",
}


class _Admin(AdminSession):
    """Group commands: a failed request becomes one line naming what was being done."""

    def wait(self, future: concurrent.futures.Future[Any], what: str) -> Any:
        from confluent_kafka import KafkaError, KafkaException

        try:
            return super().wait(future, what)
        except KafkaException as e:
            err = e.args[0] if e.args else None
            if isinstance(err, KafkaError):
                raise CliError(f"{what}: {kafka_error_text(err)}") from None
            raise

    def describe(self, group: str) -> Any:
        """The group's description; a one-line error when it does not exist."""
        futures = self.client.describe_consumer_groups([group], request_timeout=self.timeout)
        description = self.wait(futures[group], f"cannot describe group {group!r}")
        if state_name(description.state) == "Dead":
            fail(f"group {group!r} does not exist")
        return description

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures = self.client.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout
        )
        result = self.wait(futures[group], f"cannot fetch the offsets of group {group!r}")
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}

    def offsets(
        self, partitions: list[tuple[str, int]], spec: str, read_committed: bool = False
    ) -> dict[tuple[str, int], int]:
        """ListOffsets: 'earliest' (log start) or 'latest' (high watermark, or LSO when read_committed)."""
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

        if not partitions:
            return {}
        make = OffsetSpec.earliest if spec == "earliest" else OffsetSpec.latest
        isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        futures = self.client.list_offsets(
            {TopicPartition(t, p): make() for t, p in partitions},  # type: ignore[no-untyped-call]
            isolation_level=isolation,
            request_timeout=self.timeout,
        )
        out = {}
        for tp, future in futures.items():
            out[(tp.topic, tp.partition)] = self.wait(
                future, f"cannot list offsets of {tp.topic}-{tp.partition}"
            ).offset
        return out

    def topic_partitions(self, topic: str) -> list[int]:
        # all topics: asking for one by name would let the broker auto-create it
        metadata = self.session.call(
            lambda t: self.client.list_topics(timeout=t), self.client.poll, "topic metadata"
        )
        info = metadata.topics.get(topic)
        if info is None or info.error is not None or not info.partitions:
            fail(f"topic {topic!r} does not exist")
        return sorted(info.partitions)


def state_name(state: Any) -> str:
    name = getattr(state, "name", str(state))
    return _STATES.get(name, name.title())


def coordinator_request(admin: _Admin, group: str, api: int, version: int, body: Any) -> Any:
    """One request to `group`'s coordinator (FindCoordinator v4 at the first bootstrap broker), with
    exactly's protocol client and the command's security settings. CliError when it cannot be sent."""
    from exactly.client.connection import KafkaConnection
    from exactly.client.security import ClientSecurity
    from exactly.protocol.messages import ApiKey
    from exactly.protocol.messages.find_coordinator import FindCoordinatorRequest

    security = ClientSecurity.from_config(admin.session.settings)
    first = admin.session.bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")

    def call(at_host: str, at_port: int, key: int, v: int, request: Any) -> Any:
        try:
            connection = KafkaConnection.open(
                at_host, at_port, security=security, client_id="exactly-cli", timeout=admin.timeout
            )
        except OSError as e:
            raise CliError(f"cannot reach the broker at {at_host}:{at_port}: {e}") from None
        try:
            return connection.request(key, v, request)
        finally:
            connection.close()

    found = call(
        host, int(port), ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(coordinator_keys=[group])
    )
    coordinator = found.coordinators[0]
    if coordinator.error_code:
        raise CliError(f"no coordinator for group {group!r}: {ErrorCode(coordinator.error_code).name}")
    return call(coordinator.host, coordinator.port, api, version, body)


def share_listings(admin: _Admin) -> dict[str, str]:
    """Share groups and their states: ListGroups v5 (types filter "share") to every broker, which
    librdkafka's listing leaves out. Empty when the broker has share groups off."""
    from exactly.client.connection import KafkaConnection
    from exactly.client.security import ClientSecurity
    from exactly.protocol.messages import ApiKey
    from exactly.protocol.messages.list_groups import ListGroupsRequest

    metadata = admin.session.call(
        lambda t: admin.client.list_topics(timeout=t), admin.client.poll, "metadata"
    )
    security = ClientSecurity.from_config(admin.session.settings)
    out: dict[str, str] = {}
    for broker in metadata.brokers.values():
        try:
            connection = KafkaConnection.open(
                str(broker.host),
                int(broker.port),
                security=security,
                client_id="exactly-cli",
                timeout=admin.timeout,
            )
        except OSError as e:
            raise CliError(f"cannot reach broker {broker.id} at {broker.host}:{broker.port}: {e}") from None
        try:
            response = connection.request(ApiKey.LIST_GROUPS, 5, ListGroupsRequest([], ["share"]))
        finally:
            connection.close()
        out.update({g.group_id: g.group_state for g in response.groups if g.group_type == "share"})
    return out


def share_group(admin: _Admin, group: str) -> Any:
    """ShareGroupDescribe's answer when `group` is a share group; None otherwise (another type, none, or
    share groups off on the broker)."""
    from exactly.protocol.messages import ApiKey
    from exactly.protocol.messages.share_group_describe import ShareGroupDescribeRequest

    try:
        response = coordinator_request(
            admin, group, ApiKey.SHARE_GROUP_DESCRIBE, 1, ShareGroupDescribeRequest([group])
        )
    except Exception:  # noqa: BLE001 (an older broker closes the connection: not a share group then)
        return None
    described = response.groups[0] if response.groups else None
    return described if described is not None and described.error_code == 0 else None


def share_offsets(admin: _Admin, group: str) -> dict[tuple[str, int], int]:
    """DescribeShareGroupOffsets for all of the group's share partitions: (topic, partition) -> SPSO."""
    from exactly.protocol.messages import ApiKey
    from exactly.protocol.messages.describe_share_group_offsets import (
        DescribeShareGroupOffsetsRequest,
        DescribeShareGroupOffsetsRequestGroup,
    )

    request = DescribeShareGroupOffsetsRequest([DescribeShareGroupOffsetsRequestGroup(group, None)])
    response = coordinator_request(admin, group, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, request)
    described = response.groups[0]
    if described.error_code:
        fail(f"cannot describe the offsets of share group {group!r}: {ErrorCode(described.error_code).name}")
    return {
        (t.topic_name, p.partition_index): p.start_offset
        for t in described.topics
        for p in t.partitions
        if p.error_code == 0 and p.start_offset >= 0
    }


# --- list ---------------------------------------------------------------------------------------------


@groups_app.command("list")
def list_(ctx: typer.Context, bootstrap: BootstrapOption = None) -> None:
    """List groups with their type (classic, consumer, share) and state."""
    with reported_errors():
        admin = _Admin(ctx, bootstrap)
        result = admin.wait(
            admin.client.list_consumer_groups(request_timeout=admin.timeout), "cannot list groups"
        )
        shares = share_listings(admin)
        rows = [
            [g.group_id, _listed_type(g), state_name(g.state)]
            for g in result.valid
            if g.group_id not in shares
        ]
        rows += [[group, "share", state] for group, state in shares.items()]
        if rows:
            print_table(["GROUP", "TYPE", "STATE"], sorted(rows))


def _listed_type(listing: Any) -> str:
    kind = getattr(listing, "type", None)
    name = str(getattr(kind, "name", kind or "")).lower()
    return name if name in ("classic", "consumer") else "unknown"


# --- describe -----------------------------------------------------------------------------------------


@groups_app.command()
def describe(
    ctx: typer.Context,
    group: Annotated[str, typer.Argument(help="group id")],
    bootstrap: BootstrapOption = None,
) -> None:
    """Show a group's protocol, state, assignor, coordinator and members with their partitions; for a
    KIP-848 consumer group also the group and target assignment epochs, each member's epoch and its
    target assignment."""
    with reported_errors():
        admin = _Admin(ctx, bootstrap)
        shared = share_group(admin, group)
        if shared is not None:
            _describe_share_group(admin, shared)
            return
        d = admin.describe(group)
        coordinator = d.coordinator
        where = (
            f"{coordinator.id} ({coordinator.host}:{coordinator.port})" if coordinator is not None else "-"
        )
        protocol = _group_type(d)
        epochs = _consumer_group_epochs(admin, group, coordinator) if protocol == "consumer" else None
        header = (
            f"Group: {group}\tProtocol: {protocol}\tState: {state_name(d.state)}\t"
            f"Assignor: {d.partition_assignor or '-'}\tCoordinator: {where}\tMembers: {len(d.members)}"
        )
        if epochs is not None:
            header += f"\tGroup epoch: {epochs.group_epoch}\tTarget epoch: {epochs.assignment_epoch}"
        typer.echo(header)
        member_epochs = {m.member_id: m.member_epoch for m in epochs.members} if epochs is not None else {}
        rows = []
        for m in sorted(d.members, key=lambda m: m.member_id):
            row = [
                m.member_id,
                m.group_instance_id or "-",
                m.client_id,
                m.host,
                _partitions(m.assignment),
            ]
            if protocol == "consumer":
                epoch = member_epochs.get(m.member_id)
                row += [
                    "-" if epoch is None else str(epoch),
                    _partitions(getattr(m, "target_assignment", None)),
                ]
            rows.append(row)
        if rows:
            headers = ["MEMBER", "INSTANCE", "CLIENT-ID", "HOST", "PARTITIONS"]
            if protocol == "consumer":
                headers += ["EPOCH", "TARGET"]
            print_table(headers, rows)


def _describe_share_group(admin: _Admin, described: Any) -> None:
    group = described.group_id
    typer.echo(
        f"Group: {group}\tProtocol: share\tState: {described.group_state}\t"
        f"Assignor: {described.assignor_name}\tMembers: {len(described.members)}\t"
        f"Group epoch: {described.group_epoch}\tAssignment epoch: {described.assignment_epoch}"
    )
    rows = []
    for m in sorted(described.members, key=lambda m: m.member_id):
        assigned = sorted((t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions)
        partitions = ",".join(f"{t}-{p}" for t, p in assigned) or "-"
        rows.append([m.member_id, m.client_id, m.client_host, str(m.member_epoch), partitions])
    if rows:
        print_table(["MEMBER", "CLIENT-ID", "HOST", "EPOCH", "PARTITIONS"], rows)
    starts = share_offsets(admin, group)
    if not starts:
        typer.echo("no share partition state yet")
        return
    high = admin.offsets(sorted(starts), "latest")
    table = []
    for tp in sorted(starts):
        spso, hw = starts[tp], high.get(tp, -1)
        table.append([tp[0], str(tp[1]), str(spso), str(hw), str(max(hw - spso, 0)) if hw >= 0 else "-"])
    print_table(["TOPIC", "PARTITION", "START-OFFSET", "HIGH-WATERMARK", "NOT-DONE"], table)


def _group_type(description: Any) -> str:
    """ "consumer" (KIP-848) or "classic" (librdkafka's ConsumerGroupType of the description)."""
    kind = getattr(description, "type", None)
    name = str(getattr(kind, "name", kind or "")).lower()
    return "consumer" if name == "consumer" else "classic"


def _partitions(assignment: Any) -> str:
    if assignment is None:
        return "-"
    assigned = sorted((tp.topic, tp.partition) for tp in assignment.topic_partitions)
    return ",".join(f"{t}-{p}" for t, p in assigned) or "-"


def _consumer_group_epochs(admin: _Admin, group: str, coordinator: Any) -> Any:
    """ConsumerGroupDescribe (key 69) from the group's coordinator, for the epochs librdkafka's
    description leaves out; None when it cannot be had (the table is still printed)."""
    if coordinator is None:
        return None
    from exactly.client.connection import KafkaConnection
    from exactly.client.security import ClientSecurity
    from exactly.protocol.messages import ApiKey
    from exactly.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest

    try:
        security = ClientSecurity.from_config(admin.session.settings)
        connection = KafkaConnection.open(
            coordinator.host,
            coordinator.port,
            security=security,
            client_id="exactly-cli",
            timeout=admin.timeout,
        )
    except (OSError, ValueError):
        return None
    try:
        response = connection.request(
            ApiKey.CONSUMER_GROUP_DESCRIBE, 0, ConsumerGroupDescribeRequest([group])
        )
    except Exception:  # noqa: BLE001 (the epochs are extra: never fail the command for them)
        return None
    finally:
        connection.close()
    described = response.groups[0] if response.groups else None
    return described if described is not None and described.error_code == 0 else None


# --- lag ----------------------------------------------------------------------------------------------


@groups_app.command()
def lag(
    ctx: typer.Context,
    group: Annotated[str, typer.Argument(help="group id")],
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="only this topic")] = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Per partition: committed offset, high watermark, last stable offset, and the lag behind each."""
    with reported_errors():
        admin = _Admin(ctx, bootstrap)
        description = admin.describe(group)
        owners: dict[tuple[str, int], str] = {}
        for m in description.members:
            for tp in m.assignment.topic_partitions:
                owners[(tp.topic, tp.partition)] = m.client_id or m.member_id
        committed = admin.committed(group)
        partitions = sorted(set(committed) | set(owners))
        if topic is not None:
            partitions = [tp for tp in partitions if tp[0] == topic]
        if not partitions:
            typer.echo(f"group {group!r} has no committed offsets or assigned partitions")
            return
        high = admin.offsets(partitions, "latest")
        stable = admin.offsets(partitions, "latest", read_committed=True)
        rows = []
        total = total_stable = 0
        for tp in partitions:
            offset = committed.get(tp)
            hw, lso = high.get(tp, -1), stable.get(tp, -1)
            behind = max(hw - offset, 0) if offset is not None and hw >= 0 else None
            behind_stable = max(lso - offset, 0) if offset is not None and lso >= 0 else None
            total += behind or 0
            total_stable += behind_stable or 0
            rows.append(
                [
                    tp[0],
                    str(tp[1]),
                    "-" if offset is None else str(offset),
                    str(hw),
                    str(lso),
                    "-" if behind is None else str(behind),
                    "-" if behind_stable is None else str(behind_stable),
                    owners.get(tp, "-"),
                ]
            )
        print_table(
            ["TOPIC", "PARTITION", "COMMITTED", "HIGH-WATERMARK", "LSO", "LAG", "LAG-LSO", "OWNER"], rows
        )
        typer.echo(f"total lag: {total} (behind the high watermark), {total_stable} (behind the LSO)")


# --- reset-offsets ------------------------------------------------------------------------------------


@groups_app.command("reset-offsets")
def reset_offsets(
    ctx: typer.Context,
    group: Annotated[str, typer.Argument(help="group id")],
    topic: Annotated[str, typer.Option("--topic", "-t", help="topic whose offsets to reset")],
    partitions: Annotated[
        list[int] | None, typer.Option("--partition", "-p", help="only this partition; repeatable")
    ] = None,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="the log start offset")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="the high watermark")] = False,
    to_offset: Annotated[int | None, typer.Option("--to-offset", help="this offset")] = None,
    shift_by: Annotated[
        int | None, typer.Option("--shift-by", help="move the committed offset by N (may be negative)")
    ] = None,
    execute: Annotated[
        bool, typer.Option("--execute", help="apply the plan (otherwise only print it)")
    ] = False,
    bootstrap: BootstrapOption = None,
) -> None:
    """Set a group's committed offsets (the group must have no active members)."""
    with reported_errors():
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        chosen = [to_earliest, to_latest, to_offset is not None, shift_by is not None]
        if sum(chosen) != 1:
            fail("give exactly one of --to-earliest, --to-latest, --to-offset N, --shift-by N", 2)
        admin = _Admin(ctx, bootstrap)
        existing = admin.topic_partitions(topic)
        wanted = sorted(set(partitions)) if partitions else existing
        missing = [p for p in wanted if p not in existing]
        if missing:
            fail(f"topic {topic!r} has no partition {missing[0]} (it has {len(existing)})")
        shared = share_group(admin, group)
        if shared is not None:
            state = shared.group_state
        else:
            futures = admin.client.describe_consumer_groups([group], request_timeout=admin.timeout)
            state = state_name(admin.wait(futures[group], f"cannot describe group {group!r}").state)
        if state not in ("Empty", "Dead"):
            fail(f"group {group!r} is {state}: offsets can only be reset while it has no active members")
        tps = [(topic, p) for p in wanted]
        start = admin.offsets(tps, "earliest")
        end = admin.offsets(tps, "latest")
        committed: dict[tuple[str, int], int] = {}
        if shift_by is not None:
            committed = share_offsets(admin, group) if shared is not None else admin.committed(group)
        plan: dict[tuple[str, int], int] = {}
        for tp in tps:
            if to_earliest:
                target = start[tp]
            elif to_latest:
                target = end[tp]
            elif to_offset is not None:
                target = to_offset
            else:
                if tp not in committed:
                    fail(f"{tp[0]}-{tp[1]} has no committed offset in group {group!r} to shift")
                assert shift_by is not None
                target = committed[tp] + shift_by
            plan[tp] = min(max(target, start[tp]), end[tp])
        print_table(
            ["TOPIC", "PARTITION", "NEW-OFFSET"], [[t, str(p), str(o)] for (t, p), o in sorted(plan.items())]
        )
        if not execute:
            typer.echo("dry run: add --execute to apply")
            return
        if shared is not None:
            _alter_share_group_offsets(admin, group, plan)
            count = len(plan)
            typer.echo(f"reset {count} partition{'s' if count != 1 else ''} of share group {group!r}")
            return
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(t, p, o) for (t, p), o in sorted(plan.items())]
        )
        futures = admin.client.alter_consumer_group_offsets([request], request_timeout=admin.timeout)
        result = admin.wait(futures[group], f"cannot reset the offsets of group {group!r}")
        errors = [tp for tp in result.topic_partitions if tp.error is not None]
        if errors:
            fail(f"cannot reset {errors[0].topic}-{errors[0].partition}: {kafka_error_text(errors[0].error)}")
        count = len(plan)
        typer.echo(f"reset {count} partition{'s' if count != 1 else ''} of group {group!r}")


def _alter_share_group_offsets(admin: _Admin, group: str, plan: dict[tuple[str, int], int]) -> None:
    from exactly.protocol.messages import ApiKey
    from exactly.protocol.messages.alter_share_group_offsets import (
        AlterShareGroupOffsetsRequest,
        AlterShareGroupOffsetsRequestPartition,
        AlterShareGroupOffsetsRequestTopic,
    )

    by_topic: dict[str, list[AlterShareGroupOffsetsRequestPartition]] = {}
    for (t, p), offset in sorted(plan.items()):
        by_topic.setdefault(t, []).append(AlterShareGroupOffsetsRequestPartition(p, offset))
    request = AlterShareGroupOffsetsRequest(
        group, [AlterShareGroupOffsetsRequestTopic(t, ps) for t, ps in by_topic.items()]
    )
    response = coordinator_request(admin, group, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, request)
    if response.error_code:
        fail(
            f"cannot reset the offsets of share group {group!r}: "
            + _code_text(response.error_code, response.error_message)
        )
    for topic in response.responses:
        for p in topic.partitions:
            if p.error_code:
                fail(f"cannot reset {topic.topic_name}-{p.partition_index}: {ErrorCode(p.error_code).name}")


def _code_text(code: int, message: str | None) -> str:
    name = ErrorCode(code).name
    return f"{name} ({message})" if message else name


# --- delete-offsets -----------------------------------------------------------------------------------


@groups_app.command("delete-offsets")
def delete_offsets(
    ctx: typer.Context,
    group: Annotated[str, typer.Argument(help="share group id")],
    topics: Annotated[
        list[str], typer.Option("--topic", "-t", help="topic whose state to delete; repeatable")
    ],
    bootstrap: BootstrapOption = None,
) -> None:
    """Delete a share group's state (start offsets, in-flight records) for whole topics, as
    `kafka-share-groups.sh --delete-offsets` (the group must have no members); its next consumer starts
    from share.auto.offset.reset."""
    with reported_errors():
        from exactly.protocol.messages import ApiKey
        from exactly.protocol.messages.delete_share_group_offsets import (
            DeleteShareGroupOffsetsRequest,
            DeleteShareGroupOffsetsRequestTopic,
        )

        admin = _Admin(ctx, bootstrap)
        request = DeleteShareGroupOffsetsRequest(
            group, [DeleteShareGroupOffsetsRequestTopic(t) for t in topics]
        )
        response = coordinator_request(admin, group, ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, request)
        if response.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            fail(f"share group {group!r} does not exist")
        if response.error_code == ErrorCode.NON_EMPTY_GROUP:
            fail(f"share group {group!r} has active members")
        if response.error_code:
            fail(
                f"cannot delete the offsets of {group!r}: "
                + _code_text(response.error_code, response.error_message)
            )
        failures = [
            f"{t.topic_name}: {_code_text(t.error_code, t.error_message)}"
            for t in response.responses
            if t.error_code
        ]
        for t in response.responses:
            if not t.error_code:
                typer.echo(f"deleted the offsets of share group {group!r} for topic {t.topic_name!r}")
        if failures:
            fail("; ".join(failures))


# --- delete -------------------------------------------------------------------------------------------


@groups_app.command()
def delete(
    ctx: typer.Context,
    groups: Annotated[list[str], typer.Argument(help="group id(s)", show_default=False)],
    if_exists: Annotated[bool, typer.Option("--if-exists", help="succeed quietly when missing")] = False,
    bootstrap: BootstrapOption = None,
) -> None:
    """Delete groups (with their committed offsets); a group with active members cannot be deleted."""
    with reported_errors():
        from confluent_kafka import KafkaError, KafkaException

        admin = _Admin(ctx, bootstrap)
        futures = admin.client.delete_consumer_groups(list(groups), request_timeout=admin.timeout)
        failures: list[str] = []
        for group in groups:
            try:
                admin.session.wait(futures[group], admin.client.poll, f"deleting group {group!r}")
            except KafkaException as e:
                err = e.args[0] if e.args else None
                if not isinstance(err, KafkaError):
                    raise
                code = err.code()
                if code == KafkaError.GROUP_ID_NOT_FOUND:
                    if not if_exists:
                        failures.append(f"group {group!r} does not exist")
                elif code == KafkaError.NON_EMPTY_GROUP:
                    failures.append(f"group {group!r} has active members")
                else:
                    failures.append(f"cannot delete group {group!r}: {kafka_error_text(err)}")
                continue
            typer.echo(f"deleted group {group!r}")
        if failures:
            fail("; ".join(failures))
