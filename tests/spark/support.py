"""Helpers of the Spark tests: topics and records written with confluent-kafka (the writer is another
module's subject), transactions left committed / aborted / open, and polling with a deadline."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.interop.support import create_topic

T = TypeVar("T")
_counter = itertools.count()

Record = tuple[int, bytes]  # partition, value


def unique_name(prefix: str) -> str:
    return f"{prefix}-{next(_counter)}-{uuid.uuid4().hex[:6]}"


def new_topic(bootstrap: str, prefix: str, partitions: int = 1) -> str:
    name = unique_name(prefix)
    create_topic(bootstrap, name, partitions)
    return name


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_partitions([NewPartitions(topic, total)], request_timeout=30)
    for future in futures.values():
        future.result(30)


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[Record],
    *,
    key: bytes | None = None,
    headers: list[tuple[str, bytes | None]] | None = None,
) -> None:
    """Idempotent, non-transactional records (offsets without gaps), acknowledged before returning."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    failures: list[Any] = []
    for partition, value in records:
        producer.produce(
            topic,
            value,
            key=key,
            partition=partition,
            headers=headers,
            on_delivery=lambda err, _msg: failures.append(err) if err else None,
        )
    assert producer.flush(30) == 0
    assert not failures, failures


class Transaction:
    """One transactional producer whose records are flushed (stored, undecided) before the caller
    commits, aborts, or leaves the transaction open."""

    def __init__(self, bootstrap: str, topic: str, records: Sequence[Record]) -> None:
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": unique_name("spark-test-txn")}
        )
        self.producer.init_transactions(30)
        self.producer.begin_transaction()
        for partition, value in records:
            self.producer.produce(topic, value, partition=partition)
        assert self.producer.flush(30) == 0

    def commit(self) -> None:
        self.producer.commit_transaction(30)

    def abort(self) -> None:
        self.producer.abort_transaction(30)


def committed(bootstrap: str, topic: str, records: Sequence[Record]) -> None:
    Transaction(bootstrap, topic, records).commit()


def aborted(bootstrap: str, topic: str, records: Sequence[Record]) -> None:
    Transaction(bootstrap, topic, records).abort()


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 60.0, interval: float = 0.2) -> T:
    """Poll `probe` until it returns something other than None/False; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def kafka_schema(headers: bool = False) -> Any:
    """The Spark schema of the `exactly` source (`arrow.schema_ddl`) as a StructType, built without a
    Spark session."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)
