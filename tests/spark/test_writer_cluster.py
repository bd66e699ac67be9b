"""The exactly-once pipeline on a Spark standalone cluster: a master and two workers started from the
pyspark wheel (``spark-class``), the driver in its own process, the broker in another; the executors run
in the workers' JVMs and reach the broker and the driver over TCP only (the source is Spark's
deterministic ``rate-micro-batch``, so nothing is read from a shared file system)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from exactly.testing.processes import BrokerProcess, free_port
from tests.spark.kafka_io import create_topic, read_committed

pytestmark = [pytest.mark.interop, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ROWS_PER_BATCH = 50
BATCHES = 4


def spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    """spark://127.0.0.1:<port> with two registered workers of one core each."""
    port, ui_port = free_port(), free_port()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOG_DIR": str(tmp_path / "spark-logs")}
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> None:
        log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 (the child keeps it)
        procs.append(
            subprocess.Popen(
                [spark_class(), *args], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        )
        log.close()

    master = f"spark://127.0.0.1:{port}"
    try:
        start(
            "master",
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)),
        )
        procs_args = ["--cores", "1", "--memory", "1g", "--host", "127.0.0.1"]
        for i in range(2):
            start(
                f"worker-{i}",
                "org.apache.spark.deploy.worker.Worker",
                master,
                *procs_args,
                "--webui-port",
                "0",
            )
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as response:
                    alive = json.load(response).get("aliveworkers", 0)
                if alive == 2:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "master.log").read_text()[-3000:]
            time.sleep(0.5)
        yield master
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)


def test_exactly_once_stream_on_a_standalone_cluster(
    cluster: str, broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = f"cluster-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    args = [
        sys.executable,
        "-m",
        "tests.spark.stream_job",
        "--master",
        cluster,
        "--bootstrap",
        broker.bootstrap,
    ]
    args += ["--source", f"rate:{ROWS_PER_BATCH}:{BATCHES}", "--checkpoint", str(tmp_path / "ckpt")]
    args += ["--topic", topic, "--conf", "spark.executor.memory=512m", "--conf", "spark.executor.cores=1"]
    args += ["--conf", "spark.driver.host=127.0.0.1"]
    args += ["--option", "exactly.writer.hooks=exactly.testing.spark_hooks:FailTaskOnce"]
    args += ["--option", "exactly.writer.hooks.argument=1"]
    log_path = tmp_path / "job.log"
    with open(log_path, "wb") as log:
        job = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    returncode: int | None = None
    try:
        returncode = job.wait(300)
    except subprocess.TimeoutExpired:
        pass
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)
    output = log_path.read_text()
    assert returncode == 0, output[-5000:]
    batches = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert len(batches) >= BATCHES, output[-5000:]
    got = read_committed(broker.bootstrap, topic, minimum=ROWS_PER_BATCH * BATCHES)
    values = sorted(int(r.value or b"-1") for r in got)
    # whole batches, each row once; a batch cut short by the stop is never half visible
    assert values == list(range(len(values)))
    assert len(values) % ROWS_PER_BATCH == 0
