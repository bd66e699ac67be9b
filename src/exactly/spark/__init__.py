"""The PySpark data source of exactly (`pip install 'exactly[spark]'`): format name "exactly".

`register(spark)` registers it after checking that Spark's Python workers can import it
(docs/spark-deployment.md says how to give them exactly on a cluster).
"""

from exactly.spark.preflight import WorkerEnvironmentError
from exactly.spark.source import ExactlyDataSource, register

__all__ = ["ExactlyDataSource", "WorkerEnvironmentError", "register"]
