"""`exactly users add|list|delete`: SCRAM credentials, like Kafka's
`kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]' --entity-type users`.

Against a running broker the commands use confluent-kafka's AdminClient (AlterUserScramCredentials,
DescribeUserScramCredentials: the client salts and hashes the password, only the salted password travels).
`-X key=value` passes librdkafka settings, e.g. to reach a SASL listener as an existing user.

With `--data-dir DIR` they read and write the broker's metadata log directly instead: the way to create
the first user before the broker ever starts (Kafka's `kafka-storage.sh format --add-scram`). Only while
the broker is down: a running broker would not see the change.
"""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Annotated, Any

import typer

from exactly.cli.common import (
    AdminSession,
    BootstrapOption,
    CliError,
    fail,
    kafka_error_text,
    parse_key_values,
    print_table,
    reported_errors,
)

__all__ = ["users_app"]

users_app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Add, list and delete SCRAM users (SASL credentials)."
)

_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")

MechanismOption = Annotated[str, typer.Option("--mechanism", "-m", help="SCRAM-SHA-256 or SCRAM-SHA-512")]
DataDirOption = Annotated[
    Path | None,
    typer.Option("--data-dir", help="write the broker's metadata log directly (the broker must be down)"),
]
ClientConfigOption = Annotated[
    list[str] | None, typer.Option("-X", help="librdkafka setting key=value (e.g. security.protocol=...)")
]


def _mechanism(name: str) -> str:
    upper = name.upper()
    if upper not in _MECHANISMS:
        fail(f"unknown mechanism {name!r}: use SCRAM-SHA-256 or SCRAM-SHA-512", 2)
    return upper


class _Admin(AdminSession):
    """The global `exactly -X` settings and the command's own `-X` (which win), in one client."""

    def __init__(self, ctx: typer.Context, bootstrap: str | None, settings: list[str] | None) -> None:
        super().__init__(ctx, bootstrap, parse_key_values(settings, "client setting"))

    def wait(self, future: Any, what: str) -> Any:
        from confluent_kafka import KafkaError, KafkaException

        try:
            return super().wait(future, what)
        except KafkaException as e:
            err = e.args[0] if e.args else None
            if isinstance(err, KafkaError):
                raise CliError(f"{what}: {kafka_error_text(err)}") from None
            raise


def _metadata(data_dir: Path, create: bool = False) -> Any:
    """The broker's metadata log (`create`: a new data directory, for the first user)."""
    from exactly.cluster.metadata import ClusterMetadata, CorruptMetadataError

    if not create and not data_dir.is_dir():
        fail(f"data directory {data_dir} does not exist")
    try:
        return ClusterMetadata(data_dir)
    except CorruptMetadataError as e:
        fail(str(e))


@users_app.command()
def add(
    ctx: typer.Context,
    user: Annotated[str, typer.Argument(help="user name")],
    mechanism: MechanismOption = "SCRAM-SHA-256",
    password: Annotated[
        str | None, typer.Option("--password", help="the password (asked for when not given)")
    ] = None,
    iterations: Annotated[int, typer.Option("--iterations", help="PBKDF2 iterations, 4096-16384")] = 4096,
    data_dir: DataDirOption = None,
    settings: ClientConfigOption = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Add a user's SCRAM credential, or replace its password."""
    with reported_errors():
        mech = _mechanism(mechanism)
        if not user:
            fail("the user name must not be empty", 2)
        if not 4096 <= iterations <= 16384:
            fail(f"--iterations {iterations}: must be between 4096 and 16384 (Kafka's bounds)", 2)
        secret = password if password is not None else getpass.getpass(f"password for {user}: ")
        if not secret:
            fail("the password must not be empty", 2)
        if data_dir is not None:
            from exactly.security.sasl import make_scram_credential

            metadata = _metadata(data_dir, create=True)
            try:
                metadata.set_scram_credential(user, mech, make_scram_credential(mech, secret, iterations))
            finally:
                metadata.close()
        else:
            from confluent_kafka.admin._scram import (
                ScramCredentialInfo,
                ScramMechanism,
                UserScramCredentialUpsertion,
            )

            admin = _Admin(ctx, bootstrap, settings)
            number = ScramMechanism.SCRAM_SHA_256 if mech == "SCRAM-SHA-256" else ScramMechanism.SCRAM_SHA_512
            info = ScramCredentialInfo(number, iterations)
            futures = admin.client.alter_user_scram_credentials(
                [UserScramCredentialUpsertion(user, info, secret.encode())]
            )
            admin.wait(futures[user], f"cannot add {mech} credential of user {user!r}")
        print(f"user {user}: {mech} credential stored ({iterations} iterations)")


@users_app.command("list")
def list_(
    ctx: typer.Context,
    data_dir: DataDirOption = None,
    settings: ClientConfigOption = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """List the users with SCRAM credentials: mechanism and iterations (never a secret)."""
    with reported_errors():
        rows: list[list[str]] = []
        if data_dir is not None:
            metadata = _metadata(data_dir)
            metadata.close()
            rows = [[u, m, str(c.iterations)] for (u, m), c in metadata.scram_credentials.items()]
        else:
            admin = _Admin(ctx, bootstrap, settings)
            described = admin.wait(admin.client.describe_user_scram_credentials(), "cannot list users")
            for name, description in described.items():
                for info in description.scram_credential_infos:
                    rows.append([name, info.mechanism.name.replace("_", "-"), str(info.iterations)])
        if rows:
            print_table(["USER", "MECHANISM", "ITERATIONS"], sorted(rows))


@users_app.command()
def delete(
    ctx: typer.Context,
    user: Annotated[str, typer.Argument(help="user name")],
    mechanism: MechanismOption = "SCRAM-SHA-256",
    data_dir: DataDirOption = None,
    settings: ClientConfigOption = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Delete a user's SCRAM credential for one mechanism."""
    with reported_errors():
        mech = _mechanism(mechanism)
        if data_dir is not None:
            metadata = _metadata(data_dir)
            try:
                if (user, mech) not in metadata.scram_credentials:
                    fail(f"user {user!r} has no {mech} credential")
                metadata.delete_scram_credential(user, mech)
            finally:
                metadata.close()
        else:
            from confluent_kafka.admin._scram import ScramMechanism, UserScramCredentialDeletion

            admin = _Admin(ctx, bootstrap, settings)
            number = ScramMechanism.SCRAM_SHA_256 if mech == "SCRAM-SHA-256" else ScramMechanism.SCRAM_SHA_512
            futures = admin.client.alter_user_scram_credentials([UserScramCredentialDeletion(user, number)])
            admin.wait(futures[user], f"cannot delete {mech} credential of user {user!r}")
        print(f"user {user}: {mech} credential deleted")
