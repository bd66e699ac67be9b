"""The real `exactly serve` process, for the integration tests, the verification harness, the benchmarks
and the demo.

`BrokerProcess` runs it on a fixed port (so that it can be killed -9, paused with SIGSTOP and restarted
on the same address) with its output appended to `broker-<port>.log` beside the data directory (or to the
log file given). `free_port`, `child_env`, `tail` and `wait_until_listening` serve any child process.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

LISTEN_PROBE_TIMEOUT = 0.2
LISTEN_POLL_INTERVAL = 0.05


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


def tail(path: Path, chars: int = 5000) -> str:
    """The last `chars` characters of a log file ("" if there is none yet)."""
    try:
        return path.read_text(errors="replace")[-chars:]
    except FileNotFoundError:
        return ""


def accepts_connections(port: int, host: str = "127.0.0.1", timeout: float = LISTEN_PROBE_TIMEOUT) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_until_listening(
    proc: subprocess.Popen[bytes] | None,
    port: int,
    timeout: float,
    log_path: Path | None = None,
    *,
    name: str = "broker",
    poll_interval: float = LISTEN_POLL_INTERVAL,
) -> None:
    """Return once 127.0.0.1:`port` accepts connections; raise RuntimeError if `proc` (when given) exits,
    TimeoutError once `timeout` passes, both with the end of `log_path` (when given)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}:\n{_log_end(log_path)}")
        if accepts_connections(port):
            return
        time.sleep(poll_interval)
    raise TimeoutError(f"{name} did not listen within {timeout}s:\n{_log_end(log_path)}")


def _log_end(log_path: Path | None) -> str:
    return "" if log_path is None else tail(log_path)


class BrokerProcess:
    """`exactly serve` in a subprocess, on a fixed free port so that it can be killed and restarted."""

    def __init__(
        self,
        data_dir: Path,
        *settings: str,
        port: int | None = None,
        log_level: str | None = None,
        nofile: int | None = None,
        log_path: Path | None = None,
        env: Mapping[str, str] | None = None,
        detached: bool = False,
    ) -> None:
        """`log_path`: default `broker-<port>.log` beside `data_dir`; `env`: default this process's;
        `detached`: run the broker in a session of its own with no stdin, so that it outlives this process
        and the terminal it was started from (`exactly cluster up`)."""
        self.data_dir = data_dir
        self.nofile = nofile  # the broker's RLIMIT_NOFILE (soft and hard), None: inherited
        self.port = port or free_port()
        self.settings = list(settings)
        self.log_level = log_level
        self.log_path = log_path or data_dir.parent / f"broker-{self.port}.log"
        self.env = None if env is None else dict(env)
        self.detached = detached
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "the broker was not started"
        return self.proc.pid

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
            env={**os.environ} if self.env is None else self.env,
            preexec_fn=None if limit is None else limit_files,
            stdin=subprocess.DEVNULL if self.detached else None,
            start_new_session=self.detached,
        )
        log.close()
        wait_until_listening(self.proc, self.port, timeout, self.log_path)
        return self

    def log(self) -> str:
        return tail(self.log_path)

    def full_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def kill(self, timeout: float = 10.0) -> None:
        """SIGKILL: no clean shutdown."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout)

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
