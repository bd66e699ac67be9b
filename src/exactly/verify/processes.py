"""The real `exactly serve` process, for the integration tests and the verification harness.

`BrokerProcess` runs it on a fixed port (so that it can be killed -9, paused with SIGSTOP and restarted
on the same address) with its output appended to `broker-<port>.log` beside the data directory.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def child_env() -> dict[str, str]:
    """This interpreter's environment with this checkout's `src` first on PYTHONPATH, so that a child process
    (broker, worker, Spark driver) runs the same code, installed or not."""
    import exactly

    src = str(Path(exactly.__file__).resolve().parent.parent)
    path = [src, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-5000:]
    except FileNotFoundError:
        return ""


def wait_until_listening(proc: subprocess.Popen[bytes], port: int, timeout: float, log_path: Path) -> None:
    """Return once 127.0.0.1:`port` accepts connections; raise if `proc` exits or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}:\n{_tail(log_path)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"broker did not listen within {timeout}s:\n{_tail(log_path)}")


class BrokerProcess:
    """`exactly serve` in a subprocess, on a fixed free port so that it can be killed and restarted."""

    def __init__(
        self,
        data_dir: Path,
        *settings: str,
        port: int | None = None,
        log_level: str | None = None,
        nofile: int | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.nofile = nofile  # the broker's RLIMIT_NOFILE (soft and hard), None: inherited
        self.port = port or free_port()
        self.settings = list(settings)
        self.log_level = log_level
        self.log_path = data_dir.parent / f"broker-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> BrokerProcess:
        args = [sys.executable, "-m", "exactly", "serve", "--data-dir", str(self.data_dir)]
        if not any(item.startswith("listeners=") for item in self.settings):  # else `port` is the first's
            args += ["--listen", self.bootstrap]
        for item in self.settings:
            args += ["--set", item]
        if self.log_level is not None:
            args += ["--log-level", self.log_level]
        log = open(self.log_path, "ab")  # noqa: SIM115 (kept open for the child's lifetime)
        limit = self.nofile

        def limit_files() -> None:
            if limit is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        self.proc = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ},
            preexec_fn=None if limit is None else limit_files,
        )
        log.close()
        wait_until_listening(self.proc, self.port, timeout, self.log_path)
        return self

    def log(self) -> str:
        return _tail(self.log_path)

    def full_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def kill(self) -> None:
        """SIGKILL: no clean shutdown."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait for a clean exit; returns the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise
        return self.proc.returncode

    def pause(self) -> None:
        """SIGSTOP: the process stays, answers nothing, its connections stay open."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after `pause`."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def __enter__(self) -> BrokerProcess:
        """Starts the broker unless it runs (`with BrokerProcess(...).start() as broker` starts one)."""
        return self if self.running else self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
