"""The `exactly` command line. Subcommands arrive with the issues that build them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer

from exactly import __version__
from exactly.protocol.api import API_SPECS

app = typer.Typer(add_completion=False, no_args_is_help=False, help="exactly: a Kafka-compatible broker.")


@app.callback(invoke_without_command=True)
def root(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        typer.echo(f"exactly {__version__}")
        typer.echo("The broker (`exactly serve`) is not built yet. Available today:")
        typer.echo(f"  - Kafka protocol codecs for {len(API_SPECS)} APIs:")
        for spec in sorted(API_SPECS.values(), key=lambda s: s.key):
            typer.echo(
                f"      {spec.key.name:<26} key {int(spec.key):>2}  v{spec.min_version}-{spec.max_version}"
            )
        typer.echo("  - python -m exactly.bench.codec   (protocol codec benchmark)")


@app.command()
def serve(
    data_dir: Annotated[Path | None, typer.Option(help="where partitions live (./exactly-data)")] = None,
    listen: Annotated[str | None, typer.Option(help="HOST:PORT to listen on (127.0.0.1:9092)")] = None,
    advertise: Annotated[str | None, typer.Option(help="HOST:PORT clients are told to use")] = None,
    config: Annotated[Path | None, typer.Option(help="a Kafka-style server.properties")] = None,
    overrides: Annotated[
        list[str] | None, typer.Option("--set", help="key=value with Kafka config names; repeatable")
    ] = None,
) -> None:
    """Run the broker."""
    from exactly.broker.config import BrokerConfig, ConfigError, parse_overrides
    from exactly.broker.main import serve as run

    try:
        props = parse_overrides(overrides or [])
        if data_dir is not None:
            props["log.dirs"] = str(data_dir)
        if listen is not None:
            props["listeners"] = listen
        if advertise is not None:
            props["advertised.listeners"] = advertise
        broker_config = BrokerConfig.load(config, props)
    except ConfigError as e:
        _fail(str(e))
    run(broker_config)


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


def main() -> None:
    app()
