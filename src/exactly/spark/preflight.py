"""Checks the data source makes on the driver before any data moves.

`check_workers` runs one tiny job on Spark's Python workers that imports the data source and
confluent-kafka there: a worker Python without them (PYSPARK_PYTHON unset in a virtualenv, executors on
machines that were never given the packages) otherwise fails deep inside a task with a Java stack trace
around `ModuleNotFoundError: No module named 'exactly'`; here it fails with one line saying what to do.
`exactly.spark.register` runs it.

`check_schema` maps the DataFrame's columns onto Kafka record fields (Spark's Kafka sink columns:
``key``, ``value``, ``topic``, ``partition``, ``headers``); `check_broker` connects to the broker
(naming the address tried when it cannot), checks that a fixed ``topic`` exists or will be created, and
for ``guarantee=exactly-once`` that the broker offers the two-phase commit extension.
"""

from __future__ import annotations

import importlib
import logging
import re
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

from exactly.spark.writer_options import Guarantee, OptionsError, WriterOptions

log = logging.getLogger("exactly.spark.writer")

PROBE_TIMEOUT = 5.0
PROBE_PATIENCE = 10.0
METADATA_TIMEOUT = 15.0


@dataclass(frozen=True, slots=True)
class ColumnLayout:
    """Which Kafka record fields the DataFrame provides (column names as the schema spells them)."""

    value: str
    key: str | None = None
    topic: str | None = None
    partition: str | None = None
    headers: str | None = None


WORKER_MODULES = ("exactly.spark.writer", "exactly.spark.reader", "exactly.client.twopc", "confluent_kafka")
DEPLOYMENT_DOC = "docs/spark-deployment.md"
_IMPORT_ERROR = re.compile(r"(?:ModuleNotFoundError|ImportError): ([^\n\r]+)")
_NO_PROGRAM = re.compile(r'Cannot run program "([^"]+)"[^\n\r]*')


class WorkerEnvironmentError(RuntimeError):
    """Spark's Python workers cannot import the data source (one line: what failed, what to do)."""


def worker_environment_message(python: str, detail: str) -> str:
    """The one line of a `WorkerEnvironmentError` (`python`: the workers' interpreter as configured)."""
    return (
        f"exactly: Spark's Python workers ({python}) cannot load the data source: {detail}; set "
        f"PYSPARK_PYTHON to a Python that has exactly and confluent-kafka installed (this driver runs "
        f"{sys.executable}), or ship a packed environment with "
        "spark-submit --archives env.tar.gz#environment and PYSPARK_PYTHON=./environment/bin/python "
        f"(see {DEPLOYMENT_DOC})"
    )


def worker_failure(text: str) -> str | None:
    """What made a worker unable to load the data source, from a failed job's error text, or None when
    the job failed for another reason."""
    missing = _IMPORT_ERROR.search(text)
    if missing is not None:
        return missing.group(1).strip()
    no_program = _NO_PROGRAM.search(text)
    if no_program is not None:
        return no_program.group(0).strip()
    return None


def check_workers(spark: Any, modules: tuple[str, ...] = WORKER_MODULES) -> None:
    """Import `modules` in Spark's Python workers, one task per default parallelism slot;
    `WorkerEnvironmentError` when they cannot."""
    context = spark.sparkContext
    slots = max(1, int(context.defaultParallelism))
    names = [name for _ in range(slots) for name in modules]
    try:
        # builtins and importlib only: the job itself must not need exactly in the worker
        context.parallelize(names, slots).map(importlib.import_module).map(bool).collect()
    except Exception as e:  # Py4JJavaError, PythonException: the text tells
        detail = worker_failure(str(e))
        if detail is None:
            raise
        python = str(getattr(context, "pythonExec", None) or "python3")
        raise WorkerEnvironmentError(worker_environment_message(python, detail)) from None


def _is_headers_type(data_type: Any) -> bool:
    from pyspark.sql.types import ArrayType, BinaryType, StringType, StructType

    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = {f.name.lower(): f.dataType for f in data_type.elementType.fields}
    return (
        set(fields) == {"key", "value"}
        and isinstance(fields["key"], StringType)
        and isinstance(fields["value"], BinaryType | StringType)
    )


def check_schema(schema: Any, options: WriterOptions) -> ColumnLayout:
    """The column layout of `schema` (a pyspark StructType); `OptionsError` when it cannot be written."""
    from pyspark.sql.types import BinaryType, IntegerType, StringType

    by_name = {field.name.lower(): field for field in schema.fields}
    problems: list[str] = []

    def column(name: str, allowed: tuple[type, ...], what: str) -> str | None:
        field = by_name.get(name)
        if field is None:
            return None
        if not isinstance(field.dataType, allowed):
            problems.append(f"column {field.name!r} must be {what}, got {field.dataType.simpleString()}")
        return str(field.name)

    value = column("value", (BinaryType, StringType), "binary or string")
    if value is None:
        problems.append(
            "the DataFrame has no 'value' column (columns: "
            + ", ".join(f.name for f in schema.fields)
            + "); select or alias one, e.g. df.selectExpr('CAST(x AS STRING) AS value')"
        )
    key = column("key", (BinaryType, StringType), "binary or string")
    topic = column("topic", (StringType,), "string")
    partition = column("partition", (IntegerType,), "int")
    headers = None
    if "headers" in by_name:
        headers = str(by_name["headers"].name)
        if not _is_headers_type(by_name["headers"].dataType):
            problems.append(
                "column 'headers' must be array<struct<key:string,value:binary>>, got "
                + by_name["headers"].dataType.simpleString()
            )
    if topic is None and options.topic is None:
        problems.append("no topic: set the 'topic' option or provide a 'topic' column")
    if problems:
        raise OptionsError("exactly writer: " + "; ".join(problems))
    assert value is not None
    return ColumnLayout(value=value, key=key, topic=topic, partition=partition, headers=headers)


def _addresses(bootstrap: str) -> list[tuple[str, int]]:
    result: list[tuple[str, int]] = []
    for item in bootstrap.split(","):
        text = item.strip()
        if "://" in text:
            text = text.split("://", 1)[1]
        host, sep, port = text.rpartition(":")
        if not sep or not port.isdigit():
            raise OptionsError(f"exactly writer: kafka.bootstrap.servers entry {item!r} is not host:port")
        result.append((host.strip("[]"), int(port)))
    return result


def probe(bootstrap: str, patience: float = PROBE_PATIENCE) -> None:
    """Raise `OptionsError` naming every address tried when none of `bootstrap` accepts a connection
    for `patience` seconds (a broker that is restarting is waited for, briefly)."""
    addresses = _addresses(bootstrap)
    deadline = time.monotonic() + patience
    while True:
        failures: list[str] = []
        for host, port in addresses:
            try:
                with socket.create_connection((host, port), timeout=PROBE_TIMEOUT):
                    return
            except OSError as e:
                failures.append(f"{host}:{port} ({e.strerror or e})")
        if time.monotonic() >= deadline:
            raise OptionsError("exactly writer: cannot reach the broker: tried " + ", ".join(failures))
        time.sleep(0.25)


def _auto_create_enabled(config: dict[str, Any], broker_id: int) -> bool | None:
    """The broker's auto.create.topics.enable, or None when it cannot be read."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType  # type: ignore[attr-defined]

    try:
        admin = AdminClient(config)
        resource = ConfigResource(ResourceType.BROKER, str(broker_id))
        futures = admin.describe_configs([resource], request_timeout=METADATA_TIMEOUT)
        entries = futures[resource].result(timeout=METADATA_TIMEOUT)
        entry = entries.get("auto.create.topics.enable")
        return None if entry is None or entry.value is None else str(entry.value).lower() == "true"
    except Exception as e:  # noqa: BLE001 (any failure only means "unknown")
        log.info("exactly writer: cannot read auto.create.topics.enable: %s", e)
        return None


def check_broker(options: WriterOptions) -> None:
    """Connect to the broker and check the topic and, for exactly-once, the 2PC extension."""
    from confluent_kafka import KafkaException, Producer

    probe(options.bootstrap_servers)
    config: dict[str, Any] = {**options.client_config(), "logger": _quiet_logger()}
    try:
        producer = Producer(config)
    except KafkaException as e:
        raise OptionsError(f"exactly writer: invalid kafka.* setting: {e.args[0].str()}") from None
    try:
        metadata = producer.list_topics(timeout=METADATA_TIMEOUT)
    except KafkaException as e:
        raise OptionsError(
            f"exactly writer: no metadata from the broker at {options.bootstrap_servers}: {e.args[0].str()}"
        ) from None
    if options.topic is not None and options.topic not in metadata.topics:
        broker_ids = sorted(metadata.brokers)
        enabled = _auto_create_enabled(config, broker_ids[0]) if broker_ids else None
        if enabled is False:
            raise OptionsError(
                f"exactly writer: topic {options.topic!r} does not exist and the broker at "
                f"{options.bootstrap_servers} does not create topics (auto.create.topics.enable=false)"
            )
    if options.guarantee is Guarantee.EXACTLY_ONCE and not two_phase_commit_supported(options):
        raise OptionsError(
            f"exactly writer: the broker at {options.bootstrap_servers} does not offer two-phase commit "
            "(an Apache Kafka broker, or exactly with transaction.two.phase.commit.enable=false), so "
            "guarantee=exactly-once is impossible; use an exactly broker with the extension enabled, or "
            "set the option guarantee=at-least-once to accept duplicates after failures"
        )


def two_phase_commit_supported(options: WriterOptions) -> bool:
    try:
        from exactly.client.twopc import TwoPhaseClient
    except ImportError as e:  # this runs in a Python worker: an environment without exactly's dependencies
        raise OptionsError(worker_environment_message(sys.executable, str(e))) from None
    with TwoPhaseClient(options.bootstrap_servers, config=options.client_config()) as client:
        return bool(client.supported())


def _quiet_logger() -> logging.Logger:
    logger = logging.getLogger("exactly.spark.librdkafka")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger
