"""Shipping the data source to a Spark standalone cluster whose workers have no exactly (issue 23):
`spark-submit --archives env.tar#environment` of a packed virtualenv with PYSPARK_PYTHON inside it
writes and reads through the data source; workers whose Python lacks exactly make
`exactly.spark.register` fail with one line saying what to do (docs/spark-deployment.md).

The cluster's processes get no PYTHONPATH, so the executors see only what the archive (or the
interpreter named by PYSPARK_PYTHON) brings; the driver runs this interpreter with this tree's `src`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from exactly.testing.processes import BrokerProcess
from tests.spark.kafka_io import create_topic
from tests.spark.packed_env import make_worker_env
from tests.spark.standalone import spark_bin, standalone_cluster

pytestmark = [pytest.mark.interop, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "tests" / "spark" / "packed_job.py"
ROWS = 40


def _bare_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with standalone_cluster(tmp_path_factory.mktemp("deploy-cluster"), _bare_env()) as master:
        yield master


def submit(master: str, bootstrap: str, worker_python: str, *extra: str, cwd: Path) -> tuple[int, str, str]:
    """`spark-submit` of packed_job.py; returns (exit code, stdout, stderr)."""
    env = {
        **_bare_env(),
        "PYSPARK_PYTHON": worker_python,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT / "src"),  # the driver's own environment (the user's virtualenv)
    }
    topic = f"deploy-{uuid.uuid4().hex[:8]}"
    args = [spark_bin("spark-submit"), "--master", master, *extra]
    args += ["--conf", "spark.executor.memory=512m", "--conf", "spark.driver.host=127.0.0.1"]
    args += ["--conf", "spark.ui.enabled=false", "--conf", "spark.task.maxFailures=1"]
    args += [str(JOB), bootstrap, topic, str(ROWS)]
    create_topic(bootstrap, topic, 2)
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=240, check=False)
    # spark-submit copies the Python driver's stdout and stderr to its own stdout
    (cwd / "spark-submit.log").write_text(proc.stdout + "\n---- stderr ----\n" + proc.stderr)
    return proc.returncode, proc.stdout, proc.stderr


def test_a_packed_virtualenv_shipped_with_archives(
    cluster: str, broker: BrokerProcess, tmp_path: Path
) -> None:
    venv_pack = pytest.importorskip("venv_pack")
    make_worker_env(tmp_path / "env")
    archive = tmp_path / "env.tar.gz"
    venv_pack.pack(prefix=str(tmp_path / "env"), output=str(archive), format="tar.gz", verbose=False)
    # client mode: the driver's JVM starts Python workers too (to plan the data source's reads and
    # writes), with the same PYSPARK_PYTHON, relative to the directory spark-submit runs in
    (tmp_path / "environment").symlink_to(tmp_path / "env")
    code, out, err = submit(
        cluster,
        broker.bootstrap,
        "./environment/bin/python",
        "--archives",
        f"{archive}#environment",
        cwd=tmp_path,
    )
    assert code == 0, (out + err)[-5000:]
    result = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    assert result["values"] == list(range(ROWS))
    assert result["executors"], result
    assert all(path.endswith("environment/bin/python") for path in result["executors"]), result


def test_workers_without_exactly_fail_with_one_line(
    cluster: str, broker: BrokerProcess, tmp_path: Path
) -> None:
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    code, out, err = submit(cluster, broker.bootstrap, str(bare / "bin" / "python"), cwd=tmp_path)
    assert code != 0, out
    lines = [
        line
        for line in (out + err).splitlines()
        if line.startswith("exactly.spark.preflight.WorkerEnvironmentError: ")
    ]
    assert len(lines) == 1, (out + err)[-5000:]
    assert f"Spark's Python workers ({bare / 'bin' / 'python'}) cannot load the data source" in lines[0]
    assert "No module named 'exactly'" in lines[0]
    assert "PYSPARK_PYTHON" in lines[0]
    assert "--archives" in lines[0]
