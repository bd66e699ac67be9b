"""Shared fixtures of the Spark tests: ONE SparkSession per module and one broker per module.

A module may set ``SPARK_MASTER`` (e.g. ``"local[2,3]"`` to allow task retries) and
``BROKER_SETTINGS`` (broker ``--set`` items). The executors' Python is this interpreter
(``PYSPARK_PYTHON``), and tests/conftest.py already put this tree's ``src`` on PYTHONPATH for them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop.broker import BrokerProcess

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    from exactly.spark import ExactlyDataSource

    master = getattr(request.module, "SPARK_MASTER", "local[2]")
    session = (
        SparkSession.builder.master(master)
        .appName(f"exactly-tests-{request.module.__name__}")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(ExactlyDataSource)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
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
