"""The PySpark data source of exactly (`pip install 'exactly[spark]'`): format name "exactly"."""

from exactly.spark.source import ExactlyDataSource

__all__ = ["ExactlyDataSource"]
