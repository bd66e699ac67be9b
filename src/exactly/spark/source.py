"""`ExactlyDataSource`: the PySpark data source named "exactly" (readers in reader.py, writers in writer.py).

    from exactly.spark import ExactlyDataSource
    spark.dataSource.register(ExactlyDataSource)    # or exactly.spark.register(spark): checks the workers
    spark.readStream.format("exactly").option("kafka.bootstrap.servers", "127.0.0.1:9092")
        .option("subscribe", "events").load()

Options are checked before any data moves: `schema()` (run when a DataFrame is loaded without a user
schema) and `reader()` / `streamReader()` parse them and ask the broker whether the topics exist, so
a typo, a missing topic or an unreachable broker fails the `load()` / `start()` with one line.
`writer()` / `streamWriter()` check the options, the DataFrame's columns and the broker (reachable, and
offering the two-phase commit extension unless guarantee=at-least-once) the same way.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from exactly.spark.admin import SourceAdmin
from exactly.spark.arrow import schema_ddl, unknown_columns
from exactly.spark.options import ReaderOptions, SourceOptionError, parse_reader_options
from exactly.spark.preflight import check_broker, check_schema, check_workers
from exactly.spark.reader import ExactlyBatchReader, ExactlyStreamReader
from exactly.spark.writer import ExactlyBatchWriter, ExactlyStreamWriter
from exactly.spark.writer_options import writer_options


class ExactlyDataSource(DataSource):
    """Reads and writes the topics of an exactly (or Kafka) broker."""

    @classmethod
    def name(cls) -> str:
        return "exactly"

    def _checked_reader_options(self, schema: StructType | None = None) -> ReaderOptions:
        options = parse_reader_options(self.options)
        if schema is not None:
            unknown = unknown_columns(schema)
            if unknown:
                raise SourceOptionError(
                    f"schema has column(s) {', '.join(unknown)}, which a Kafka record does not have"
                )
        SourceAdmin(options).subscribed_partitions()
        return options

    def schema(self) -> str:
        """Spark's Kafka source schema (headers with includeHeaders=true)."""
        return schema_ddl(self._checked_reader_options().include_headers)

    def reader(self, schema: StructType) -> ExactlyBatchReader:
        return ExactlyBatchReader(self._checked_reader_options(schema), schema)

    def streamReader(self, schema: StructType) -> ExactlyStreamReader:
        return ExactlyStreamReader(self._checked_reader_options(schema), schema)

    def writer(self, schema: Any, overwrite: bool) -> ExactlyBatchWriter:
        options = writer_options(self.options)
        layout = check_schema(schema, options)
        check_broker(options)
        return ExactlyBatchWriter(options, layout)

    def streamWriter(self, schema: Any, overwrite: bool) -> ExactlyStreamWriter:
        options = writer_options(self.options)
        layout = check_schema(schema, options)
        check_broker(options)
        return ExactlyStreamWriter(options, layout)


def register(spark: Any, check: bool = True) -> None:
    """Register the "exactly" format with `spark` after checking (`check`) that Spark's Python workers
    can import the data source: `WorkerEnvironmentError`, one line saying what to do, when they cannot
    (preflight.check_workers; a tiny job, about a second)."""
    if check:
        check_workers(spark)
    spark.dataSource.register(ExactlyDataSource)
