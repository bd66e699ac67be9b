"""Shared fixtures of the Spark tests: ONE SparkSession per test module (local[2], small memory, no UI,
2 shuffle partitions) with the `exactly` data source registered, and one broker per module
(`spark_broker`). Every test works on its own topics (`support.unique_name`).

PySpark's Python workers must run this interpreter (`PYSPARK_PYTHON`), and they import this work
tree's `src` (tests/conftest.py puts it first on PYTHONPATH before the JVM starts).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop.broker import BrokerProcess
from tests.interop.support import running_broker

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


def spark_session(app_name: str, master: str = "local[2]", **conf: str) -> Any:
    """A fresh SparkSession with the data source registered (the caller stops it)."""
    from pyspark.sql import SparkSession

    from exactly.spark import ExactlyDataSource

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "768m")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(ExactlyDataSource)
    return spark


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    """One SparkSession for the whole module (starting one costs seconds)."""
    pytest.importorskip("pyspark")
    session = spark_session(f"exactly-tests-{request.module.__name__}")
    try:
        yield session
    finally:
        for query in session.streams.active:
            query.stop()
        session.stop()


@pytest.fixture(scope="module")
def spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the module."""
    with running_broker(
        tmp_path_factory.mktemp("spark") / "data", "group.initial.rebalance.delay.ms=0"
    ) as proc:
        yield proc


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return tmp_path / "checkpoint"
