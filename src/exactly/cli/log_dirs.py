"""`exactly log-dirs describe [--topic T ...]`: the broker's log dir, its free space and each
partition's size on disk (DescribeLogDirs), like Kafka's `kafka-log-dirs.sh --describe`.

confluent-kafka's AdminClient has no DescribeLogDirs, so this uses kafka-python's `KafkaAdminClient`.
Output: one row per log dir (total and usable bytes), a blank line, then one row per partition (size in
bytes, offset lag, whether it is a future replica).
"""

from __future__ import annotations

from typing import Annotated

import typer

from exactly.cli.common import BootstrapOption, kafka_python_admin, print_table, reported_errors

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
