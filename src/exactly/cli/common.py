"""Shared plumbing of the client commands: one-line errors, the bootstrap option, and confluent-kafka
clients that fail fast (and readably) when the broker cannot be reached.

Every client command runs its body inside `reported_errors()`, which turns any exception into a single
``error: ...`` line on stderr and a non-zero exit code: never a traceback. librdkafka's own log lines are
routed to a silent logger for the same reason; its errors reach us through ``error_cb`` instead.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from confluent_kafka import KafkaError
    from kafka.admin import KafkaAdminClient

__all__ = [
    "BOOTSTRAP_ENV",
    "DEFAULT_BOOTSTRAP",
    "KAFKA_PYTHON_TIMEOUT_MS",
    "REQUEST_TIMEOUT",
    "AdminSession",
    "BootstrapOption",
    "CliError",
    "KafkaSession",
    "bootstrap_server",
    "client_settings",
    "fail",
    "kafka_error_text",
    "kafka_python_admin",
    "one_line",
    "parse_key_values",
    "print_error",
    "print_table",
    "reported_errors",
    "session_for",
]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "EXACTLY_BOOTSTRAP_SERVER"
REQUEST_TIMEOUT = 30.0  # seconds, for one admin/metadata round trip
_POLL_INTERVAL = 0.05

T = TypeVar("T")

BootstrapOption = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-server",
        "-b",
        help=f"HOST:PORT[,HOST:PORT...] of the broker (default: the global option, ${BOOTSTRAP_ENV}, "
        f"or {DEFAULT_BOOTSTRAP})",
        show_default=False,
    ),
]


class CliError(Exception):
    """A failure to report as one ``error: ...`` line, exiting with `exit_code`."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def fail(message: str, exit_code: int = 1) -> NoReturn:
    raise CliError(message, exit_code)


def one_line(text: str) -> str:
    """Collapse whitespace (including newlines) so that a message is always a single line."""
    return " ".join(str(text).split())


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    """Left-aligned columns separated by two spaces, headers first (like Kafka's tools)."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    for row in [headers, *rows]:
        typer.echo("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def print_error(message: str) -> None:
    typer.echo(f"error: {one_line(message)}", err=True)


@contextlib.contextmanager
def reported_errors() -> Iterator[None]:
    """Run a command body; any exception becomes one ``error:`` line on stderr and a non-zero exit."""
    try:
        yield
    except CliError as e:
        print_error(e.message)
        raise typer.Exit(e.exit_code) from None
    except (typer.Exit, typer.Abort, KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception as e:  # noqa: BLE001 - the whole point: a readable line instead of a traceback
        print_error(_describe_exception(e))
        raise typer.Exit(1) from None


# The client library each distribution name provides, for a readable "not installed" error.
_DISTRIBUTIONS = {"confluent_kafka": "confluent-kafka", "kafka": "kafka-python"}


def _describe_exception(e: BaseException) -> str:
    if isinstance(e, ModuleNotFoundError) and e.name:
        top = e.name.partition(".")[0]
        package = _DISTRIBUTIONS.get(top, top)
        return f"this command needs the Python package {package!r}, not installed: pip install {package}"
    # Only look at confluent-kafka's exception types if the library is loaded: importing it here would
    # fail a second time when it is the missing piece.
    kafka = sys.modules.get("confluent_kafka")
    cause = e.args[0] if kafka is not None and isinstance(e, kafka.KafkaException) and e.args else None
    if kafka is not None and isinstance(cause, kafka.KafkaError):
        return kafka_error_text(cause)
    if isinstance(e, OSError) and e.strerror:
        return f"{e.filename}: {e.strerror}" if e.filename else e.strerror
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def kafka_error_text(err: KafkaError) -> str:
    """A KafkaError's message without librdkafka's 'Broker: ' prefix, lower-cased like ours."""
    text = str(err.str())
    for prefix in ("Broker: ", "Local: "):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            text = text[:1].lower() + text[1:]
    return text or str(err.name())


def parse_key_values(items: list[str] | None, what: str = "config") -> dict[str, str]:
    """``['a=1', 'b=2']`` -> ``{'a': '1', 'b': '2'}``; a missing '=' is a usage error."""
    result: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            fail(f"invalid {what} {item!r}: expected KEY=VALUE", 2)
        result[key] = value
    return result


def bootstrap_server(ctx: typer.Context, local: str | None) -> str:
    """The command's own ``-b``, else the global ``exactly -b``, else $EXACTLY_BOOTSTRAP_SERVER, else
    the default."""
    if local:
        return local
    root = ctx.find_root()
    value = root.params.get("bootstrap_server")
    if isinstance(value, str) and value:
        return value
    return os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP


def client_settings(ctx: typer.Context) -> dict[str, str]:
    """The global ``exactly -X KEY=VALUE`` client settings (security.protocol, sasl.*, ssl.*, ...)."""
    items = ctx.find_root().params.get("command_config") or []
    return parse_key_values(list(items), "client setting")


def session_for(
    ctx: typer.Context, bootstrap: str | None, settings: dict[str, str] | None = None
) -> KafkaSession:
    """The KafkaSession of a client command: its bootstrap and the global client settings, overridden by
    the command's own (`exactly acls --command-config`, `exactly users -X`)."""
    merged = {**client_settings(ctx), **(settings or {})}
    return KafkaSession(bootstrap_server(ctx, bootstrap), settings=merged)


def _quiet_logger() -> logging.Logger:
    logger = logging.getLogger("exactly.cli.librdkafka")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


class KafkaSession:
    """Configuration and error tracking shared by the confluent-kafka clients of one command.

    librdkafka retries an unreachable broker until a request times out; `wait` and `call` instead watch
    the clients' ``error_cb`` and give up as soon as librdkafka reports that all brokers are down, with
    the underlying reason (connection refused, name not resolved, ...).
    """

    def __init__(
        self, bootstrap: str, timeout: float = REQUEST_TIMEOUT, settings: dict[str, str] | None = None
    ) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.settings = dict(settings or {})  # `exactly -X KEY=VALUE`: security.protocol, sasl.*, ssl.*
        self.errors: list[KafkaError] = []
        self._lock = threading.Lock()

    def config(self, **extra: Any) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "client.id": "exactly-cli",
            "logger": _quiet_logger(),
            "error_cb": self._on_error,
        }
        conf.update(self.settings)
        conf.update({key.replace("_", "."): value for key, value in extra.items()})
        return conf

    def _on_error(self, err: KafkaError) -> None:
        with self._lock:
            self.errors.append(err)

    def check(self) -> None:
        """Raise CliError when librdkafka reported a fatal error or that no broker can be reached."""
        from confluent_kafka import KafkaError

        with self._lock:
            errors = list(self.errors)
        for err in errors:
            if err.fatal():
                fail(f"fatal client error: {kafka_error_text(err)}")
        if any(err.code() == KafkaError._ALL_BROKERS_DOWN for err in errors):
            reasons = [
                err
                for err in errors
                if err.code() in (KafkaError._TRANSPORT, KafkaError._RESOLVE, KafkaError._AUTHENTICATION)
            ]
            detail = f": {_connect_reason(reasons[-1])}" if reasons else ""
            fail(f"cannot reach the broker at {self.bootstrap}{detail}")

    def wait(self, future: concurrent.futures.Future[T], poll: Callable[[float], Any], what: str) -> T:
        """The future's result, serving the client's callbacks (``poll``) meanwhile."""
        deadline = time.monotonic() + self.timeout
        while True:
            done, _ = concurrent.futures.wait([future], timeout=_POLL_INTERVAL)
            poll(0)
            if done:
                if future.exception() is not None:
                    self.check()  # prefer "cannot reach the broker" over a generic transport error
                return future.result()
            self.check()
            if time.monotonic() > deadline:
                fail(
                    f"timed out after {self.timeout:g} s waiting for the broker at {self.bootstrap} ({what})"
                )

    def call(self, fn: Callable[[float], T], poll: Callable[[float], Any], what: str) -> T:
        """Run a blocking client call that takes a timeout (like ``list_topics``) in short slices,
        serving the client's callbacks (``poll``) between them, until it succeeds or the broker is
        known to be unreachable."""
        from confluent_kafka import KafkaError, KafkaException

        deadline = time.monotonic() + self.timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                return fn(max(0.1, min(0.25, remaining)))
            except KafkaException as e:
                err = e.args[0] if e.args else None
                if not isinstance(err, KafkaError) or err.code() not in (
                    KafkaError._TRANSPORT,
                    KafkaError._TIMED_OUT,
                ):
                    raise
            poll(0)
            self.check()
            if time.monotonic() > deadline:
                fail(
                    f"timed out after {self.timeout:g} s waiting for the broker at {self.bootstrap} ({what})"
                )


class AdminSession:
    """An AdminClient plus the session that turns its failures into one-line errors.

    The one client of a command, made once with every setting given (the global ``-X`` and the
    command's own `settings`): librdkafka connects as soon as a client exists, so a client made first
    without the security settings and replaced would reach a SASL listener unauthenticated.
    """

    def __init__(
        self, ctx: typer.Context, bootstrap: str | None, settings: dict[str, str] | None = None
    ) -> None:
        from confluent_kafka.admin import AdminClient

        self.session = session_for(ctx, bootstrap, settings)
        self.client: AdminClient = AdminClient(self.session.config())
        self.timeout = self.session.timeout

    def wait(self, future: concurrent.futures.Future[Any], what: str) -> Any:
        return self.session.wait(future, self.client.poll, what)


def _connect_reason(err: KafkaError) -> str:
    """'127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection refused (after 0ms in
    state CONNECT)' -> 'Connect to ipv4#127.0.0.1:9 failed: Connection refused'."""
    text = kafka_error_text(err)
    head, sep, rest = text.partition(": ")
    if sep and "/" in head and " " not in head:
        text = rest
    cut = text.rfind(" (after ")
    if cut > 0:
        text = text[:cut]
    return text


KAFKA_PYTHON_TIMEOUT_MS = 15_000
KAFKA_PYTHON_BOOTSTRAP_TIMEOUT_MS = 5_000


# librdkafka's setting names (what `exactly -X` takes) -> kafka-python's KafkaAdminClient arguments
_KAFKA_PYTHON_NAMES = {
    "client.id": "client_id",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",
}


def kafka_python_settings(settings: dict[str, str]) -> dict[str, Any]:
    """The `exactly -X` client settings (librdkafka names) as kafka-python arguments, so the commands
    built on kafka-python reach a SASL or SSL listener with the same settings as the others.

    >>> kafka_python_settings({"security.protocol": "sasl_plaintext", "sasl.username": "u"})
    {'security_protocol': 'SASL_PLAINTEXT', 'sasl_plain_username': 'u'}
    """
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if key == "ssl.endpoint.identification.algorithm":
            out["ssl_check_hostname"] = value.lower() == "https"
        elif key in _KAFKA_PYTHON_NAMES:
            name = _KAFKA_PYTHON_NAMES[key]
            upper = name in ("security_protocol", "sasl_mechanism")
            out[name] = value.upper() if upper else value
        else:
            known = ", ".join(sorted([*_KAFKA_PYTHON_NAMES, "ssl.endpoint.identification.algorithm"]))
            fail(f"client setting {key!r} is not supported by this command (it takes: {known})", 2)
    return out


def kafka_python_admin(ctx: typer.Context, bootstrap: str | None) -> KafkaAdminClient:
    """kafka-python's admin client, for the APIs confluent-kafka's lacks (DescribeLogDirs, the KIP-664
    transaction APIs, partition reassignments), with the global `exactly -X` settings. One line when
    the broker cannot be reached."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaTimeoutError

    server = bootstrap_server(ctx, bootstrap)
    conf: dict[str, Any] = {
        "client_id": "exactly-cli",
        "request_timeout_ms": KAFKA_PYTHON_TIMEOUT_MS,
        "bootstrap_timeout_ms": KAFKA_PYTHON_BOOTSTRAP_TIMEOUT_MS,
        **kafka_python_settings(client_settings(ctx)),
    }
    try:
        return KafkaAdminClient(bootstrap_servers=server, **conf)
    except KafkaTimeoutError:
        fail(f"cannot reach the broker at {server}")
