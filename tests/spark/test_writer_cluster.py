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
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from exactly.testing.processes import BrokerProcess
from tests.spark.kafka_io import create_topic, read_committed
from tests.spark.standalone import standalone_cluster

pytestmark = [pytest.mark.interop, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ROWS_PER_BATCH = 50
BATCHES = 4


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    """spark://127.0.0.1:<port> with two registered workers of one core each."""
    with standalone_cluster(tmp_path, {**os.environ, "PYSPARK_PYTHON": sys.executable}) as master:
        yield master


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
