"""A Spark standalone cluster for the tests: a master and workers started from the pyspark wheel
(``spark-class``), each a process group of its own that is SIGKILLed at the end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from exactly.testing.processes import free_port


def spark_bin(name: str) -> str:
    """A script of the pyspark wheel's bin/ (spark-class, spark-submit)."""
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / name)


@contextmanager
def standalone_cluster(directory: Path, env: Mapping[str, str], workers: int = 2) -> Iterator[str]:
    """spark://127.0.0.1:<port> with `workers` registered workers of one core each; logs in `directory`.
    `env`: the master's and workers' environment (what the executors inherit, PYTHONPATH included)."""
    port, ui_port = free_port(), free_port()
    env = {**env, "SPARK_LOG_DIR": str(directory / "spark-logs")}
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> None:
        log = open(directory / f"{name}.log", "wb")  # noqa: SIM115 (the child keeps it)
        procs.append(
            subprocess.Popen(
                [spark_bin("spark-class"), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
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
        worker_args = ["--cores", "1", "--memory", "1g", "--host", "127.0.0.1", "--webui-port", "0"]
        for i in range(workers):
            start(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", master, *worker_args)
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as response:
                    alive = json.load(response).get("aliveworkers", 0)
                if alive == workers:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, (directory / "master.log").read_text()[-3000:]
            time.sleep(0.5)
        yield master
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
