"""A real, standalone ZooKeeper server in a subprocess, for the replicated cluster's tests, CI and
`exactly cluster up`.

`ZooKeeperProcess` runs Debian's ZooKeeper (package `zookeeper`, 3.8; its jars live in /usr/share/java)
on a fixed port of 127.0.0.1 with its data in `data_dir`, so that it can be stopped, killed -9 and
restarted on the same address with the same data (the sessions it knew survive a restart that is quicker
than their timeout). It writes its own configuration, `data_dir/zoo.cfg`:

    tickTime=<tick_time_ms>             the server's clock; session timeouts are clamped to
    minSessionTimeout=<2 * tick>          [minSessionTimeout, maxSessionTimeout]
    maxSessionTimeout=60000             (so a 6,000 or 18,000 ms session is granted as asked)
    dataDir=<data_dir>                  snapshots and transaction logs (data_dir/version-2)
    clientPort=<port>
    clientPortAddress=127.0.0.1
    admin.enableServer=false            else the AdminServer takes port 8080
    4lw.commands.whitelist=ruok,srvr,stat,mntr
    preAllocSize=4096                   (KiB) transaction-log files of 4 MiB, not 64 MiB

It serves clients through Netty (NettyServerCnxnFactory), not the default NIO factory: ZooKeeper 3.8.0's
NIO factory accepts connections before the database is loaded, and a connect request arriving then is
never answered nor closed (NIOServerCnxn.close fails on the missing database), so a client reconnecting
during a restart waits out its whole connect timeout (its session timeout) and loses its session. Netty
closes such a connection and the client retries.

It sends the server's log (slf4j-simple, INFO) and its stdout/stderr to `data_dir/zookeeper.log`,
appended across restarts. It is ready once it answers the four-letter word `ruok` with `imok` and `srvr`
with its mode (`ruok` alone answers while the database is still loading: "not currently serving").
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from exactly.testing.processes import free_port, tail

# where Debian puts the server's jars (libzookeeper-java) and the slf4j binding it can log through
JAR_DIRS: tuple[Path, ...] = (Path("/usr/share/java"), Path("/usr/share/zookeeper"))
# what NettyServerCnxnFactory needs beyond the netty jars zookeeper.jar's manifest names
NETTY_EXTRA = ("codec", "resolver")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
JVM_OPTIONS: tuple[str, ...] = (
    "-Xms32m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",  # starts faster; a test server does little work
    "-Djava.net.preferIPv4Stack=true",
    "-Dzookeeper.serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
    "-Dzookeeper.jmx.log4j.disable=true",
    "-Dorg.slf4j.simpleLogger.logFile=System.err",  # then into zookeeper.log with stdout
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss.SSS",
)
RUOK_PROBE_TIMEOUT = 0.5
RUOK_POLL_INTERVAL = 0.05


class ZooKeeperNotInstalled(RuntimeError):
    """Java or Debian's ZooKeeper jars are missing."""


def _first(patterns: Sequence[str]) -> Path | None:
    for directory in JAR_DIRS:
        for pattern in patterns:
            found = sorted(directory.glob(pattern))
            if found:
                return found[-1]
    return None


def zookeeper_classpath() -> list[Path]:
    """The server jar, its jute jar, the Netty jars its manifest lacks and slf4j-simple (when installed),
    from Debian's locations. Debian's zookeeper.jar names its other dependencies (netty's transport,
    jackson, slf4j-api, ...) in its manifest."""
    server = _first(["zookeeper.jar", "zookeeper-3.*[0-9].jar"])
    jute = _first(["zookeeper-jute.jar", "zookeeper-jute-3.*[0-9].jar"])
    if server is None or jute is None:
        places = ", ".join(str(d) for d in JAR_DIRS)
        raise ZooKeeperNotInstalled(
            f"ZooKeeper's jars (zookeeper.jar, zookeeper-jute.jar) are not in {places}: "
            "install Debian's package (apt-get install zookeeper)"
        )
    netty = [_first([f"netty-{name}.jar", f"netty-{name}-4.*.jar"]) for name in NETTY_EXTRA]
    if None in netty:
        raise ZooKeeperNotInstalled(
            f"Netty's {', '.join(NETTY_EXTRA)} jars are not in {JAR_DIRS[0]}: install libnetty-java"
        )
    slf4j = _first(["slf4j-simple.jar", "slf4j-simple-*.jar"])  # without it the server logs nothing
    return [server, jute, *(jar for jar in netty if jar is not None), *([slf4j] if slf4j is not None else [])]


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperNotInstalled("no java on PATH (and no JAVA_HOME): ZooKeeper needs a JRE")
    return java


def four_letter_word(
    port: int, word: str, host: str = "127.0.0.1", timeout: float = RUOK_PROBE_TIMEOUT
) -> str:
    """Send a four-letter command (ruok, srvr, stat, mntr) and return the whole answer ("" if none)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(word.encode("ascii"))
            chunks: list[bytes] = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode("utf-8", errors="replace")
    except OSError:
        return ""


class ZooKeeperProcess:
    """One standalone ZooKeeper server on 127.0.0.1:`port` (default: a free port, kept across restarts)."""

    def __init__(
        self, data_dir: Path, port: int | None = None, tick_time_ms: int = 500, *, detached: bool = False
    ) -> None:
        """`detached`: run the server in a session of its own, so that it outlives this process and the
        terminal it was started from (`exactly cluster up`)."""
        self.detached = detached
        self.data_dir = data_dir
        self.port = port or free_port()
        self.tick_time_ms = tick_time_ms
        self.config_path = data_dir / "zoo.cfg"
        self.log_path = data_dir / "zookeeper.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "ZooKeeper was not started"
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def config(self) -> str:
        """The text of zoo.cfg (see the module docstring)."""
        return "".join(
            f"{key}={value}\n"
            for key, value in (
                ("tickTime", self.tick_time_ms),
                ("minSessionTimeout", 2 * self.tick_time_ms),
                ("maxSessionTimeout", 60000),
                ("dataDir", self.data_dir.resolve()),
                ("clientPort", self.port),
                ("clientPortAddress", "127.0.0.1"),
                ("admin.enableServer", "false"),
                ("4lw.commands.whitelist", "ruok,srvr,stat,mntr"),
                ("preAllocSize", 4096),
            )
        )

    def command(self) -> list[str]:
        classpath = os.pathsep.join(str(jar) for jar in zookeeper_classpath())
        return [java_executable(), *JVM_OPTIONS, "-cp", classpath, MAIN_CLASS, str(self.config_path)]

    def start(self, timeout: float = 30.0) -> ZooKeeperProcess:
        """Write zoo.cfg, start the server and return once it answers `ruok`; raise RuntimeError if it
        exits first, TimeoutError after `timeout` seconds (both with the end of its log)."""
        if self.running:
            return self
        args = self.command()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self.config())
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=self.detached,
            )
        self._wait_ready(self.proc, timeout)
        return self

    def _wait_ready(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {proc.returncode}:\n{self.log()}")
            if self.ruok() and self.serving():
                return
            time.sleep(RUOK_POLL_INTERVAL)
        self.kill()
        raise TimeoutError(f"ZooKeeper did not answer ruok within {timeout}s:\n{self.log()}")

    def ruok(self) -> bool:
        """Whether the server answers `ruok` with `imok` (it runs and serves requests)."""
        return four_letter_word(self.port, "ruok") == "imok"

    def serving(self) -> bool:
        """Whether the server has loaded its database and serves clients (`srvr` reports its mode)."""
        return "Mode: " in four_letter_word(self.port, "srvr")

    def log(self, chars: int = 5000) -> str:
        return tail(self.log_path, chars)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait for the exit (SIGKILL after `timeout`); returns the exit code (None if it was
        never started). The sessions stay in the data: a restart within their timeout keeps them."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise
        return self.proc.returncode

    def kill(self, timeout: float = 10.0) -> None:
        """SIGKILL: no clean shutdown (what it acknowledged is in its transaction log)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout)

    def restart(self, timeout: float = 30.0) -> ZooKeeperProcess:
        """Stop (if running) and start again on the same port with the same data directory."""
        self.stop()
        return self.start(timeout)

    def __enter__(self) -> ZooKeeperProcess:
        """Starts the server unless it runs."""
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
