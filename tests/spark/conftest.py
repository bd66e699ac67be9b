"""Shared fixtures of the Spark tests: ONE SparkSession per test module (small memory, no UI, 2 shuffle
partitions) with the `exactly` data source registered, and one broker per module. Every test works on
its own topics (`support.unique_name`).

A module may set ``SPARK_MASTER`` (e.g. ``"local[2,3]"`` to allow task retries; default ``local[2]``) and
``BROKER_SETTINGS`` (the `broker` fixture's ``--set`` items). `spark_broker` is a broker with the
defaults (and no initial rebalance delay).

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

from exactly.testing.processes import BrokerProcess
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
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
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
    master = getattr(request.module, "SPARK_MASTER", "local[2]")
    session = spark_session(f"exactly-tests-{request.module.__name__}", master)
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


@pytest.fixture(scope="module")
def broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    """One broker for the module, with the module's ``BROKER_SETTINGS``; tests may kill and restart it."""
    settings: tuple[str, ...] = tuple(getattr(request.module, "BROKER_SETTINGS", ()))
    data_dir: Path = tmp_path_factory.mktemp("broker") / "data"
    proc = BrokerProcess(data_dir, *settings)
    proc.start()
    try:
        yield proc
    finally:
        if proc.proc is not None and proc.proc.poll() is None:
            try:
                proc.stop(timeout=15)
            except Exception:  # noqa: BLE001 - a hung shutdown must not hide the test's own failure
                proc.kill()


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return tmp_path / "checkpoint"
