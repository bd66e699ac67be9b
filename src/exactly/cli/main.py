"""The `exactly` command line. Subcommands arrive with the issues that build them."""

from __future__ import annotations

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
            typer.echo(f"      {spec.key.name:<26} key {int(spec.key):>2}  v{spec.min_version}-{spec.max_version}")
        typer.echo("  - python -m exactly.bench.codec   (protocol codec benchmark)")


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


def main() -> None:
    app()
