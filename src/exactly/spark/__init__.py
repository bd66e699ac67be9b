"""The `exactly` PySpark data source (needs the ``spark`` extra: pyspark, pyarrow, pandas)."""

from exactly.spark.source import ExactlyDataSource

__all__ = ["ExactlyDataSource"]
