"""The writer's schema checks and the broker reachability probe (no Spark session)."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from exactly.spark.preflight import ColumnLayout, check_schema, probe
from exactly.spark.writer_options import OptionsError, writer_options
from exactly.testing.processes import free_port

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def schema(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(name, data_type) for name, data_type in fields])  # type: ignore[arg-type]


def test_layout_of_all_columns_any_case() -> None:
    options = writer_options({"kafka.bootstrap.servers": "h:1"})
    layout = check_schema(
        schema(
            ("Key", BinaryType()),
            ("VALUE", StringType()),
            ("topic", StringType()),
            ("partition", IntegerType()),
            ("headers", HEADERS),
            ("extra", LongType()),
        ),
        options,
    )
    assert layout == ColumnLayout(
        value="VALUE", key="Key", topic="topic", partition="partition", headers="headers"
    )


def test_value_only_with_topic_option() -> None:
    options = writer_options({"kafka.bootstrap.servers": "h:1", "topic": "t"})
    assert check_schema(schema(("value", BinaryType())), options) == ColumnLayout(value="value")


def test_bad_schemas() -> None:
    options = writer_options({"kafka.bootstrap.servers": "h:1"})
    with pytest.raises(OptionsError) as info:
        check_schema(
            schema(
                ("key", IntegerType()),
                ("topic", BinaryType()),
                ("headers", ArrayType(StringType())),
            ),
            options,
        )
    text = str(info.value)
    assert "has no 'value' column (columns: key, topic, headers)" in text
    assert "column 'key' must be binary or string, got int" in text
    assert "column 'topic' must be string, got binary" in text
    assert "column 'headers' must be array<struct<key:string,value:binary>>, got array<string>" in text
    assert "no topic" not in text  # a topic column exists, even if mistyped


def test_probe_names_every_address_tried() -> None:
    first, second = free_port(), free_port()
    with pytest.raises(OptionsError) as info:
        probe(f"127.0.0.1:{first},PLAINTEXT://127.0.0.1:{second}", patience=0.5)
    text = str(info.value)
    assert f"tried 127.0.0.1:{first} (Connection refused), 127.0.0.1:{second} (Connection refused)" in text
    with pytest.raises(OptionsError, match="is not host:port"):
        probe("localhost")


def test_a_worker_that_cannot_import_the_data_source_is_named_in_one_line() -> None:
    from exactly.spark.preflight import worker_environment_message, worker_failure

    java = (
        "An error occurred while calling o42.collect.\n: org.apache.spark.SparkException: Job aborted\n"
        'Traceback (most recent call last):\n  File "worker.py"\nModuleNotFoundError: No module named '
        "'exactly'\n\n\tat org.apache.spark.api.python.BasePythonRunner"
    )
    assert worker_failure(java) == "No module named 'exactly'"
    assert worker_failure("ImportError: libssl.so.3: cannot open shared object file\n") == (
        "libssl.so.3: cannot open shared object file"
    )
    no_program = 'java.io.IOException: Cannot run program "./environment/bin/python": error=2, No such file'
    assert worker_failure(no_program) == no_program.removeprefix("java.io.IOException: ")
    assert worker_failure("org.apache.spark.SparkException: Job aborted: executor lost") is None
    line = worker_environment_message("/usr/bin/python3", "No module named 'exactly'")
    assert "\n" not in line
    assert line.startswith("exactly: Spark's Python workers (/usr/bin/python3) cannot load the data source: ")
    for hint in ("PYSPARK_PYTHON", "--archives env.tar.gz#environment", "docs/spark-deployment.md"):
        assert hint in line
