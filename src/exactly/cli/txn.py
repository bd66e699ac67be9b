"""`exactly txn list|describe|describe-producers|find-hanging|abort|list-prepared|abort-batch|abort-query`:
the operator's view of transactions, like Kafka's `kafka-transactions.sh` (KIP-664), plus the prepared
work of the two-phase commit extension (docs/two-phase-commit.md).

confluent-kafka's AdminClient has no ListTransactions, DescribeTransactions, DescribeProducers or
admin WriteTxnMarkers, so these commands use kafka-python's `KafkaAdminClient`, which routes each
request to the transaction coordinator or partition leader as Kafka's Admin does.

`find-hanging` follows Kafka's `FindHangingTransactionsCommand`: a partition's open transaction
(DescribeProducers: a producer whose current transaction started at some offset) is *hanging* when it
has been open longer than `--max-transaction-timeout-ms` and the coordinator does not know it as an
Ongoing transaction of that producer that includes the partition — nobody will ever end it, and it holds
back every read_committed consumer of the partition. `abort` ends one with an ABORT marker written by
the partition leader (WriteTxnMarkers), after which consumers move on.

Prepared transactions (the Spark sink's exactly-once output waiting for its driver's decision) are
reported as Ongoing by ListTransactions/DescribeTransactions (Kafka's clients know no other name);
`list` marks them Prepared, `list-prepared` shows their (query, batch, partition) and the recorded
decisions, and `abort-batch` / `abort-query` abort an abandoned query's undecided work (ListPreparedTxns,
AbortBatch through `exactly.client.twopc`), which releases the last stable offset of its partitions.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from exactly.cli.common import (
    KAFKA_PYTHON_TIMEOUT_MS,
    BootstrapOption,
    bootstrap_server,
    client_settings,
    fail,
    kafka_python_admin,
    print_table,
    reported_errors,
)

if TYPE_CHECKING:
    from kafka.admin import KafkaAdminClient

    from exactly.client.twopc import TwoPhaseClient

__all__ = ["txn_app"]

txn_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="List and describe transactions, find hanging ones and abort them (kafka-transactions.sh).",
)

_ACTIVE = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


def _admin(ctx: typer.Context, bootstrap: str | None) -> KafkaAdminClient:
    return kafka_python_admin(ctx, bootstrap)


def _state(value: Any) -> str:
    return str(getattr(value, "value", value))


def _partitions_text(partitions: Any) -> str:
    return ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(partitions)) or "-"


def _all_partitions(admin: KafkaAdminClient, topic: str | None, partition: int | None) -> list[Any]:
    from kafka import TopicPartition

    metadata = admin.describe_topics([topic] if topic else None)
    out: list[Any] = []
    for info in metadata:
        if info.get("error_code", 0):
            fail(f"topic {info.get('name')!r} does not exist")
        name = info["name"]
        if info.get("is_internal") and topic is None:
            continue
        for p in info["partitions"]:
            if partition is None or p["partition_index"] == partition:
                out.append(TopicPartition(name, p["partition_index"]))
    if topic is not None and partition is not None and not out:
        fail(f"partition {topic}-{partition} does not exist")
    return sorted(out)


# --- list / describe ------------------------------------------------------------------------------------


@txn_app.command("list")
def list_(
    ctx: typer.Context,
    state: Annotated[list[str] | None, typer.Option("--state", help="only these states (repeatable)")] = None,
    producer_id: Annotated[
        list[int] | None, typer.Option("--producer-id", help="only these producer ids")
    ] = None,
    duration_ms: Annotated[
        int | None, typer.Option("--duration-ms", help="only transactions running at least this long")
    ] = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """List the transactional ids the coordinators know, with their producer id and state."""
    with reported_errors():
        admin = _admin(ctx, bootstrap)
        listed = admin.list_transactions(
            producer_id_filters=producer_id or None,
            state_filters=state or None,
            duration_filter_ms=duration_ms,
        )
        prepared = _prepared_ids(bootstrap_server(ctx, bootstrap), client_settings(ctx))
        rows = sorted(
            [
                t.transactional_id,
                str(broker),
                str(t.producer_id),
                "Prepared" if t.transactional_id in prepared else _state(t.state),
            ]
            for broker, listings in listed.items()
            for t in listings
        )
        if rows:
            print_table(["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE"], rows)


@txn_app.command()
def describe(
    ctx: typer.Context,
    transactional_id: Annotated[str, typer.Argument(help="the transactional.id", show_default=False)],
    bootstrap: BootstrapOption = None,
) -> None:
    """State, producer, timeout, age and partitions of one transactional id."""
    from kafka.errors import TransactionalIdNotFoundError

    with reported_errors():
        admin = _admin(ctx, bootstrap)
        try:
            description = admin.describe_transactions([transactional_id])[transactional_id]
        except TransactionalIdNotFoundError:
            fail(f"transactional id {transactional_id!r} does not exist")
        start = description.transaction_start_time_ms
        age = (
            str(int(time.time() * 1000) - start)
            if start >= 0 and _state(description.state) in _ACTIVE  # Prepared is reported as Ongoing
            else "-"
        )
        print_table(
            [
                "COORDINATOR",
                "TRANSACTIONAL-ID",
                "PRODUCER-ID",
                "PRODUCER-EPOCH",
                "STATE",
                "TIMEOUT-MS",
                "START-MS",
                "DURATION-MS",
                "PARTITIONS",
            ],
            [
                [
                    str(description.coordinator_id),
                    transactional_id,
                    str(description.producer_id),
                    str(description.producer_epoch),
                    "Prepared"
                    if transactional_id
                    in _prepared_ids(bootstrap_server(ctx, bootstrap), client_settings(ctx))
                    else _state(description.state),
                    str(description.transaction_timeout_ms),
                    str(start),
                    age,
                    _partitions_text(description.topic_partitions),
                ]
            ],
        )


@txn_app.command("describe-producers")
def describe_producers(
    ctx: typer.Context,
    topic: Annotated[str, typer.Option("--topic", help="the topic", show_default=False)],
    partition: Annotated[int, typer.Option("--partition", help="the partition", show_default=False)],
    bootstrap: BootstrapOption = None,
) -> None:
    """The active producers of a partition and the first offset of their open transactions."""
    from kafka import TopicPartition

    with reported_errors():
        admin = _admin(ctx, bootstrap)
        _all_partitions(admin, topic, partition)  # a clear error for a missing topic or partition
        tp = TopicPartition(topic, partition)
        state = admin.describe_producers([tp])[tp]
        rows = [
            [
                str(p.producer_id),
                str(p.producer_epoch),
                str(p.last_sequence),
                str(p.last_timestamp),
                str(p.coordinator_epoch),
                str(p.current_transaction_start_offset)
                if p.current_transaction_start_offset >= 0
                else "None",
            ]
            for p in sorted(state.active_producers)
        ]
        if rows:
            print_table(
                [
                    "PRODUCER-ID",
                    "PRODUCER-EPOCH",
                    "LAST-SEQUENCE",
                    "LAST-TIMESTAMP",
                    "COORDINATOR-EPOCH",
                    "CURRENT-TRANSACTION-START-OFFSET",
                ],
                rows,
            )


# --- find-hanging / abort ----------------------------------------------------------------------------------


@txn_app.command("find-hanging")
def find_hanging(
    ctx: typer.Context,
    topic: Annotated[str | None, typer.Option("--topic", help="only this topic")] = None,
    partition: Annotated[
        int | None, typer.Option("--partition", help="only this partition (with --topic)")
    ] = None,
    max_transaction_timeout_ms: Annotated[
        int, typer.Option("--max-transaction-timeout-ms", help="the brokers' transaction.max.timeout.ms")
    ] = 900_000,
    bootstrap: BootstrapOption = None,
) -> None:
    """Open transactions on partitions that their coordinator will never end."""
    with reported_errors():
        if partition is not None and topic is None:
            fail("--partition needs --topic", 2)
        admin = _admin(ctx, bootstrap)
        hanging = find_hanging_transactions(admin, topic, partition, max_transaction_timeout_ms)
        if hanging:
            print_table(
                [
                    "TOPIC",
                    "PARTITION",
                    "PRODUCER-ID",
                    "PRODUCER-EPOCH",
                    "COORDINATOR-EPOCH",
                    "START-OFFSET",
                    "DURATION-MS",
                ],
                [[str(cell) for cell in row] for row in hanging],
            )


def find_hanging_transactions(
    admin: KafkaAdminClient, topic: str | None, partition: int | None, max_timeout_ms: int
) -> list[tuple[str, int, int, int, int, int, int]]:
    """(topic, partition, producer id, epoch, coordinator epoch, start offset, age ms) of each hanging
    transaction."""
    partitions = _all_partitions(admin, topic, partition)
    producers = admin.describe_producers(partitions) if partitions else {}
    now = int(time.time() * 1000)
    candidates = [
        (tp, p)
        for tp, state in producers.items()
        for p in state.active_producers
        if p.current_transaction_start_offset >= 0 and now - p.last_timestamp >= max_timeout_ms
    ]
    if not candidates:
        return []
    listed = admin.list_transactions(producer_id_filters=sorted({p.producer_id for _, p in candidates}))
    ids_by_producer: dict[int, list[str]] = {}
    for listings in listed.values():
        for t in listings:
            ids_by_producer.setdefault(t.producer_id, []).append(t.transactional_id)
    wanted = sorted({txn_id for ids in ids_by_producer.values() for txn_id in ids})
    descriptions = admin.describe_transactions(wanted) if wanted else {}
    out: list[tuple[str, int, int, int, int, int, int]] = []
    for tp, p in candidates:
        known = any(
            _state(d.state) == "Ongoing" and d.producer_epoch == p.producer_epoch and tp in d.topic_partitions
            for txn_id in ids_by_producer.get(p.producer_id, [])
            if (d := descriptions.get(txn_id)) is not None
        )
        if not known:
            age = now - p.last_timestamp
            out.append(
                (
                    tp.topic,
                    tp.partition,
                    p.producer_id,
                    p.producer_epoch,
                    p.coordinator_epoch,
                    p.current_transaction_start_offset,
                    age,
                )
            )
    return sorted(out)


@txn_app.command()
def abort(
    ctx: typer.Context,
    topic: Annotated[str, typer.Option("--topic", help="the partition's topic", show_default=False)],
    partition: Annotated[int, typer.Option("--partition", help="the partition", show_default=False)],
    start_offset: Annotated[
        int, typer.Option("--start-offset", help="first offset of the open transaction", show_default=False)
    ],
    bootstrap: BootstrapOption = None,
) -> None:
    """Abort the open transaction that started at START_OFFSET on a partition (an ABORT marker)."""
    from kafka import TopicPartition
    from kafka.admin._transactions import AbortTransactionSpec

    with reported_errors():
        admin = _admin(ctx, bootstrap)
        _all_partitions(admin, topic, partition)
        tp = TopicPartition(topic, partition)
        state = admin.describe_producers([tp])[tp]
        match = [p for p in state.active_producers if p.current_transaction_start_offset == start_offset]
        if not match:
            fail(f"no open transaction starts at offset {start_offset} of {topic}-{partition}")
        producer = match[0]
        admin.abort_transaction(
            AbortTransactionSpec(
                tp, producer.producer_id, producer.producer_epoch, producer.coordinator_epoch
            )
        )
        typer.echo(
            f"aborted the transaction of producer {producer.producer_id} (epoch {producer.producer_epoch}) "
            f"that started at offset {start_offset} of {topic}-{partition}"
        )


# --- two-phase commit: prepared work -------------------------------------------------------------------


def _two_phase(server: str, settings: dict[str, str]) -> TwoPhaseClient:
    from exactly.client.twopc import TwoPhaseClient

    client = TwoPhaseClient(
        server, timeout=KAFKA_PYTHON_TIMEOUT_MS / 1000, client_id="exactly-cli", config=settings
    )
    try:
        supported = client.supported()
    except Exception:
        client.close()
        raise
    if not supported:
        client.close()
        fail(f"the broker at {server} has no two-phase commit extension (or it is switched off)")
    return client


def _prepared_ids(server: str, settings: dict[str, str]) -> set[str]:
    """The ids ListPreparedTxns lists (empty if the broker has no extension)."""
    from exactly.client.twopc import TwoPhaseClient

    with TwoPhaseClient(
        server, timeout=KAFKA_PYTHON_TIMEOUT_MS / 1000, client_id="exactly-cli", config=settings
    ) as client:
        if not client.supported():
            return set()
        prepared, _ = client.list_prepared()
        return {t.transactional_id for t in prepared}


@txn_app.command("list-prepared")
def list_prepared(
    ctx: typer.Context,
    query: Annotated[str | None, typer.Option("--query", help="only this query id")] = None,
    decisions: Annotated[
        bool, typer.Option("--decisions", help="list the recorded batch decisions instead")
    ] = False,
    bootstrap: BootstrapOption = None,
) -> None:
    """Prepared transactions waiting for their batch's decision (or, --decisions, the decisions)."""
    with reported_errors():
        with _two_phase(bootstrap_server(ctx, bootstrap), client_settings(ctx)) as client:
            prepared, decided = client.list_prepared(query)
        if decisions:
            if decided:
                print_table(
                    ["QUERY", "BATCH", "WINNERS"],
                    [[d.query_id, str(d.batch_id), ",".join(d.winners) or "-"] for d in decided],
                )
            return
        now = int(time.time() * 1000)
        if prepared:
            print_table(
                ["TRANSACTIONAL-ID", "QUERY", "BATCH", "PARTITION", "PRODUCER-ID", "AGE-MS", "PARTITIONS"],
                [
                    [
                        t.transactional_id,
                        t.query_id,
                        str(t.batch_id),
                        str(t.partition),
                        str(t.producer_id),
                        str(max(0, now - t.prepared_timestamp_ms)),
                        ",".join(f"{topic}-{p}" for topic, p in t.partitions) or "-",
                    ]
                    for t in prepared
                ],
            )


@txn_app.command("abort-batch")
def abort_batch(
    ctx: typer.Context,
    query: Annotated[str, typer.Option("--query", help="the query id", show_default=False)],
    batch: Annotated[int, typer.Option("--batch", help="the batch id", min=0, show_default=False)],
    bootstrap: BootstrapOption = None,
) -> None:
    """Abort the prepared work of one undecided batch of a query (a decided batch stays decided)."""
    with reported_errors():
        with _two_phase(bootstrap_server(ctx, bootstrap), client_settings(ctx)) as client:
            decision, aborted = client.abort_batch_ids(query, batch)
        if decision is not None:
            typer.echo(
                f"batch {batch} of query {query} is decided ({len(decision.winners)} transactions commit): "
                "nothing aborted"
            )
            return
        typer.echo(f"aborted {len(aborted)} prepared transactions of batch {batch} of query {query}")
        for txn_id in aborted:
            typer.echo(txn_id)


@txn_app.command("abort-query")
def abort_query(
    ctx: typer.Context,
    query: Annotated[str, typer.Option("--query", help="the query id", show_default=False)],
    bootstrap: BootstrapOption = None,
) -> None:
    """Abort the prepared work of every undecided batch of a query (an abandoned query)."""
    with reported_errors():
        with _two_phase(bootstrap_server(ctx, bootstrap), client_settings(ctx)) as client:
            aborted = client.abort_query(query)
        typer.echo(f"aborted {len(aborted)} prepared transactions of query {query}")
        for txn_id in aborted:
            typer.echo(txn_id)
