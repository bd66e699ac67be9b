"""`ExactlyDataSource`: the PySpark data source registered under the format name ``"exactly"``.

(Minimal version of the writer branch: the reader branch brings schema() and the readers.)
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource

from exactly.spark.options import writer_options
from exactly.spark.preflight import check_broker, check_schema
from exactly.spark.writer import ExactlyBatchWriter, ExactlyStreamWriter


class ExactlyDataSource(DataSource):
    """Reads and writes the topics of an exactly (or Kafka) broker."""

    @classmethod
    def name(cls) -> str:
        return "exactly"

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
