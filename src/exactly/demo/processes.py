"""The demo's two child processes: the embedded broker (`exactly.testing.processes.BrokerProcess`: `exactly
serve` on a free port and a data directory, killed -9 and restarted on both) and the Spark job's driver
(`exactly.demo.job`, in its own process group so that kill -9 takes its JVM too, its JSON event lines read
by a thread)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from exactly.demo import DemoError
from exactly.testing.processes import BrokerProcess, child_env, tail

BROKER_START_TIMEOUT = 60.0


class ProcessError(DemoError):
    """A child process failed to start or ended badly (one-line message)."""


def _child_env() -> dict[str, str]:
    """The children run this checkout's code; Spark's Python workers run this interpreter."""
    return {**child_env(), "PYSPARK_PYTHON": sys.executable}


class DemoBroker:
    """`exactly serve` on 127.0.0.1:`port` with `data_dir`; its output appended to `log_path`
    (a `BrokerProcess` whose failures are `ProcessError`s)."""

    def __init__(self, data_dir: Path, log_path: Path, port: int | None = None) -> None:
        self.process = BrokerProcess(
            data_dir, port=port, log_level="WARNING", log_path=log_path, env=_child_env()
        )

    @property
    def data_dir(self) -> Path:
        return self.process.data_dir

    @property
    def log_path(self) -> Path:
        return self.process.log_path

    @property
    def port(self) -> int:
        return self.process.port

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap

    def start(self) -> float:
        """Start and wait until it listens; the seconds that took."""
        started = time.monotonic()
        try:
            self.process.start(timeout=BROKER_START_TIMEOUT)
        except RuntimeError:  # it exited
            code = self.process.proc.returncode if self.process.proc is not None else None
            raise ProcessError(f"the broker exited with {code}: {tail(self.log_path, 500)}") from None
        except TimeoutError:
            raise ProcessError(
                f"the broker did not listen on {self.bootstrap} within {BROKER_START_TIMEOUT:g} s"
            ) from None
        return time.monotonic() - started

    def kill(self) -> None:
        """kill -9: no clean shutdown."""
        self.process.kill(timeout=30)

    def stop(self) -> None:
        """SIGTERM and wait (SIGKILL after 30 s)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.stop(timeout=30)


class JobProcess:
    """One run of the Spark job's driver (`python -m exactly.demo.job ...`).

    stdout lines that are JSON objects become `events()`; everything (and stderr) goes to `log_path`."""

    def __init__(self, args: list[str], log_path: Path, cwd: Path) -> None:
        self.log_path = log_path
        self._events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._log: IO[bytes] = log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "exactly.demo.job", *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=_child_env(),
            start_new_session=True,  # its own process group: kill -9 reaches the JVM and Python workers
        )
        self._reader = threading.Thread(target=self._read, name="job-stdout", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._log.write(line)
            self._log.flush()
            text = line.decode(errors="replace").strip()
            if text.startswith("{"):
                try:
                    event = json.loads(text)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    self._events.put(event)

    def events(self) -> list[dict[str, Any]]:
        """The event lines read since the last call."""
        out: list[dict[str, Any]] = []
        while True:
            try:
                out.append(self._events.get_nowait())
            except queue.Empty:
                return out

    def returncode(self) -> int | None:
        code = self.proc.poll()
        if code is not None:
            self._reader.join(10)  # the last lines before the exit
        return code

    def kill(self) -> None:
        """kill -9 of the driver's whole process group (the driver, its JVM, the Python workers)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._reader.join(10)
        self._log.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        else:
            self._reader.join(10)
            self._log.close()
