"""`exactly log-dirs describe [--topic T ...]`: the broker's log dirs, their free space and each
partition's size on disk (DescribeLogDirs), like Kafka's `kafka-log-dirs.sh --describe`;
`exactly log-dirs move --topic T --partition P --to DIR [--broker N] [--wait]`: move a replica to another
log dir of its broker (AlterReplicaLogDirs, as `kafka-reassign-partitions.sh` does with `log_dirs`).

confluent-kafka's AdminClient has neither API, so this uses kafka-python's `KafkaAdminClient`.
`describe` prints one row per log dir (total and usable bytes), a blank line, then one row per partition
(size in bytes, offset lag, whether it is a future replica: one being moved there). `move` prints one line
when the broker accepted the move (the copy runs in the background; `--wait` waits until the replica is in
DIR and its old copy is gone), or one `error:` line (LOG_DIR_NOT_FOUND, REPLICA_NOT_AVAILABLE, ...).
"""

from __future__ import annotations

import os
import time
from typing import Annotated, Any

import typer

from exactly.cli.common import BootstrapOption, fail, kafka_python_admin, print_table, reported_errors

__all__ = ["app"]

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Describe the broker's log directories and partition sizes (kafka-log-dirs.sh).",
)


@app.command()
def describe(
    ctx: typer.Context,
    topic: Annotated[
        list[str] | None, typer.Option("--topic", "-t", help="only these topics (repeatable); default all")
    ] = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Log dirs with their total and usable bytes, then every partition's size on disk."""
    with reported_errors():
        admin = kafka_python_admin(ctx, bootstrap)
        try:
            results = admin.describe_log_dirs(list(topic) if topic else None)
        finally:
            admin.close()
        dirs: list[list[str]] = []
        partitions: list[list[str]] = []
        for broker in results:
            for log_dir in broker["log_dirs"]:
                dirs.append(
                    [
                        str(broker["broker"]),
                        log_dir["log_dir"],
                        str(log_dir["error_code"]),
                        str(log_dir.get("total_bytes", -1)),
                        str(log_dir.get("usable_bytes", -1)),
                    ]
                )
                for t in log_dir["topics"]:
                    for p in t["partitions"]:
                        partitions.append(
                            [
                                t["name"],
                                str(p["partition_index"]),
                                str(p["partition_size"]),
                                str(p["offset_lag"]),
                                str(p["is_future_key"]).lower(),
                                log_dir["log_dir"],
                            ]
                        )
        print_table(["BROKER", "LOG-DIR", "ERROR", "TOTAL-BYTES", "USABLE-BYTES"], dirs)
        if partitions:
            typer.echo("")
            partitions.sort(key=lambda row: (row[0], int(row[1])))
            print_table(["TOPIC", "PARTITION", "SIZE", "OFFSET-LAG", "IS-FUTURE", "LOG-DIR"], partitions)


@app.command()
def move(
    ctx: typer.Context,
    topic: Annotated[str, typer.Option("--topic", "-t", help="the partition's topic")],
    partition: Annotated[int, typer.Option("--partition", "-p", help="the partition")],
    to: Annotated[
        str, typer.Option("--to", help="the log dir to move it to (a path in the broker's log.dirs)")
    ],
    broker: Annotated[
        int | None, typer.Option("--broker", help="the broker whose replica moves (default: the only one)")
    ] = None,
    wait: Annotated[bool, typer.Option("--wait", help="wait until the move is done")] = False,
    timeout: Annotated[float, typer.Option(help="seconds --wait waits at most")] = 60.0,
    bootstrap: BootstrapOption = None,
) -> None:
    """Move a partition's replica to another log dir of its broker (AlterReplicaLogDirs)."""
    from kafka import TopicPartitionReplica
    from kafka.errors import NoError

    with reported_errors():
        path = os.path.abspath(to)  # Kafka matches absolute paths
        admin = kafka_python_admin(ctx, bootstrap)
        try:
            broker_id = broker if broker is not None else _only_broker(admin)
            replica = TopicPartitionReplica(topic, partition, broker_id)
            outcome = admin.alter_replica_log_dirs({replica: path}).get(replica)
            if outcome is None:
                fail(f"broker {broker_id} did not answer for {topic}-{partition}")
            if outcome is not NoError:
                fail(f"cannot move {topic}-{partition} to {path} on broker {broker_id}: {outcome.__name__}")
            if wait:
                _wait_moved(admin, broker_id, topic, partition, path, timeout)
                typer.echo(f"moved {topic}-{partition} to {path} on broker {broker_id}")
            else:
                typer.echo(f"moving {topic}-{partition} to {path} on broker {broker_id}")
        finally:
            admin.close()


def _only_broker(admin: Any) -> int:
    brokers = sorted(b["broker_id"] for b in admin.describe_cluster()["brokers"])
    if len(brokers) != 1:
        fail(f"the cluster has brokers {brokers}: say which one's replica moves with --broker", 2)
    return int(brokers[0])


def _wait_moved(admin: Any, broker_id: int, topic: str, partition: int, path: str, timeout: float) -> None:
    """Until DescribeLogDirs shows the replica in `path` only, as a current (not future) log."""
    deadline = time.monotonic() + timeout
    while True:
        places = [
            (log_dir["log_dir"], p["is_future_key"])
            for result in admin.describe_log_dirs({topic: [partition]}, brokers=[broker_id])
            for log_dir in result["log_dirs"]
            for t in log_dir["topics"]
            if t["name"] == topic
            for p in t["partitions"]
            if p["partition_index"] == partition
        ]
        if places == [(path, False)]:
            return
        if time.monotonic() > deadline:
            fail(f"{topic}-{partition} is not in {path} after {timeout:g} s (now: {places})")
        time.sleep(0.1)
