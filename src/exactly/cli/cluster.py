"""`exactly cluster up|down|status`: a replicated cluster of real processes on this machine, for trying
replication by hand: one ZooKeeper (Debian's, `exactly.testing.zookeeper`) and N brokers
(`exactly.testing.cluster`, ids 1..N, replication factor min(3, N), min.insync.replicas 2) on loopback,
detached so that they outlive the command, with what was started recorded in DIR/cluster.json
(`exactly.cli.cluster_file`) for `status` and `down`.

Layout of DIR: `zookeeper/` (zoo.cfg, its data and zookeeper.log), `broker-<id>/data` and
`broker-<id>.log`, `cluster.json`.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from exactly.cli.cluster_file import (
    CLUSTER_FILE,
    BrokerEntry,
    ClusterFile,
    ClusterFileError,
    ZooKeeperEntry,
    owns,
)
from exactly.cli.common import KafkaSession, fail, one_line, print_table, reported_errors

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Start, inspect and stop a local replicated cluster (ZooKeeper and N brokers).",
)

DEFAULT_DIR = Path("exactly-cluster")
BROKER_STOP_TIMEOUT = 30.0  # seconds for a controlled shutdown before SIGKILL
ZOOKEEPER_STOP_TIMEOUT = 20.0
STOP_POLL_INTERVAL = 0.1

DirOption = Annotated[
    Path, typer.Option("--dir", "-d", help="the cluster's directory (data, logs, cluster.json)")
]


# --- up -----------------------------------------------------------------------------------------------


@app.command()
def up(
    brokers: Annotated[int, typer.Option("--brokers", "-n", help="how many brokers (ids 1..N)")] = 3,
    directory: DirOption = DEFAULT_DIR,
    zookeeper: Annotated[
        str | None,
        typer.Option("--zookeeper", help="HOST:PORT of an existing ZooKeeper instead of starting one"),
    ] = None,
    session_timeout_ms: Annotated[
        int, typer.Option("--session-timeout-ms", help="the brokers' ZooKeeper session timeout")
    ] = 6000,
    timeout: Annotated[
        float, typer.Option("--timeout", help="seconds to wait for the cluster to form")
    ] = 120.0,
) -> None:
    """Start ZooKeeper and N brokers in the background; print the bootstrap servers."""
    with reported_errors():
        from exactly.testing.cluster import ClusterProcesses
        from exactly.testing.zookeeper import ZooKeeperNotInstalled, ZooKeeperProcess

        if brokers < 1:
            fail(f"--brokers must be at least 1, not {brokers}", 2)
        if session_timeout_ms < 1:
            fail(f"--session-timeout-ms must be positive, not {session_timeout_ms}", 2)
        if zookeeper is not None:
            _check_host_port(zookeeper)
        root = directory.resolve()
        state_path = root / CLUSTER_FILE
        if state_path.exists():
            previous = _read(state_path)
            if _running(previous):
                fail(
                    f"a cluster already runs in {directory} (bootstrap servers: {previous.bootstrap}); "
                    f"stop it with: exactly cluster down --dir {directory}"
                )
            state_path.unlink()  # stale: everything it names is gone
        root.mkdir(parents=True, exist_ok=True)

        zk: ZooKeeperProcess | None = None
        cluster: ClusterProcesses | None = None
        try:
            if zookeeper is None:
                zk = ZooKeeperProcess(root / "zookeeper", detached=True)
                typer.echo(f"starting ZooKeeper on {zk.connect_string} ...")
                try:
                    zk.start()
                except ZooKeeperNotInstalled as e:
                    fail(str(e))
                except (RuntimeError, TimeoutError) as e:
                    fail(f"ZooKeeper did not start (see {zk.log_path}): {_first_line(e)}")
                connect = zk.connect_string
            else:
                connect = zookeeper
            cluster = ClusterProcesses(
                root, connect, brokers, session_timeout_ms=session_timeout_ms, detached=True
            )
            for broker_id, broker in cluster.brokers.items():
                typer.echo(f"starting broker {broker_id} on {broker.bootstrap} ...")
                try:
                    broker.start()
                except (RuntimeError, TimeoutError) as e:
                    fail(f"broker {broker_id} did not start (see {broker.log_path}): {_first_line(e)}")
            _wait_for_brokers(cluster.bootstrap, set(cluster.brokers), timeout)
            state = ClusterFile(
                ZooKeeperEntry(
                    connect=connect,
                    port=int(connect.rpartition(":")[2]),
                    pid=None if zk is None else zk.pid,
                    data_dir=None if zk is None else str(zk.data_dir),
                    log_file=None if zk is None else str(zk.log_path),
                ),
                tuple(
                    BrokerEntry(b_id, b.pid, b.port, str(b.data_dir), str(b.log_path))
                    for b_id, b in cluster.brokers.items()
                ),
            )
            state.write(state_path)
        except BaseException:
            # nothing half-started survives a failure (or ^C)
            if cluster is not None:
                for broker in cluster.brokers.values():
                    broker.kill()
            if zk is not None:
                zk.kill()
            raise
        typer.echo(
            f"cluster of {brokers} broker{'s' if brokers != 1 else ''} up "
            f"(ZooKeeper {connect}; state in {state_path})"
        )
        typer.echo(f"bootstrap servers: {state.bootstrap}")
        typer.echo(f"stop it with: exactly cluster down --dir {directory}")


def _check_host_port(value: str) -> None:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        fail(f"--zookeeper {value!r}: expected HOST:PORT", 2)


def _first_line(e: BaseException) -> str:
    return one_line(str(e).splitlines()[0] if str(e) else type(e).__name__)


def _wait_for_brokers(bootstrap: str, expected: set[int], timeout: float) -> None:
    """Until Metadata lists every broker in `expected` and a controller."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(KafkaSession(bootstrap).config())  # librdkafka's log lines silenced
    deadline = time.monotonic() + timeout
    seen: set[int] = set()
    while time.monotonic() < deadline:
        try:
            metadata = admin.list_topics(timeout=2)
        except Exception:  # noqa: BLE001 (not up yet)
            pass
        else:
            seen = set(metadata.brokers)
            if seen == expected and metadata.controller_id >= 0:
                return
        time.sleep(0.2)
    fail(
        f"the cluster shows brokers {sorted(seen)}, not {sorted(expected)}, after {timeout:g} s "
        "(see the brokers' logs)"
    )


# --- down ---------------------------------------------------------------------------------------------


@app.command()
def down(
    directory: DirOption = DEFAULT_DIR,
    timeout: Annotated[
        float,
        typer.Option("--timeout", help="seconds each broker gets for a clean shutdown before SIGKILL"),
    ] = BROKER_STOP_TIMEOUT,
) -> None:
    """Stop the brokers (SIGTERM: a controlled shutdown, one at a time), then ZooKeeper."""
    with reported_errors():
        state_path = directory.resolve() / CLUSTER_FILE
        if not state_path.exists():
            typer.echo(f"no cluster runs in {directory} (no {CLUSTER_FILE})")
            return
        state = _read(state_path)
        for broker in sorted(state.brokers, key=lambda b: b.id, reverse=True):
            outcome = _stop(broker.pid, broker.marker, timeout)
            typer.echo(f"broker {broker.id} (pid {broker.pid}): {outcome}")
        zk = state.zookeeper
        if zk.pid is not None and zk.marker is not None:
            outcome = _stop(zk.pid, zk.marker, ZOOKEEPER_STOP_TIMEOUT)
            typer.echo(f"ZooKeeper (pid {zk.pid}): {outcome}")
        else:
            typer.echo(f"ZooKeeper at {zk.connect}: not started by this cluster, left running")
        state_path.unlink()
        typer.echo(f"cluster in {directory} stopped")


def _stop(
    pid: int,
    marker: str,
    timeout: float,
    *,
    alive: Callable[[int, str], bool] = owns,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """SIGTERM `pid` (if it is still the process of `marker`), wait up to `timeout`, then SIGKILL."""
    if not alive(pid, marker):
        return "was not running"
    started = clock()
    if not _signal(pid, signal.SIGTERM):
        return "was not running"
    while clock() - started < timeout:
        if not alive(pid, marker):
            return f"stopped in {clock() - started:.1f} s"
        sleep(STOP_POLL_INTERVAL)
    _signal(pid, signal.SIGKILL)
    deadline = clock() + 10.0
    while alive(pid, marker) and clock() < deadline:
        sleep(STOP_POLL_INTERVAL)
    if alive(pid, marker):
        fail(f"pid {pid} survived SIGKILL")
    return f"killed (SIGKILL) after {timeout:g} s without a clean exit"


def _signal(pid: int, sig: signal.Signals) -> bool:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


# --- status -------------------------------------------------------------------------------------------


@app.command()
def status(directory: DirOption = DEFAULT_DIR) -> None:
    """Which of the cluster's processes run (exit 1 if there is no cluster in DIR)."""
    with reported_errors():
        state_path = directory.resolve() / CLUSTER_FILE
        if not state_path.exists():
            fail(f"no cluster runs in {directory} (no {CLUSTER_FILE}); start one with: exactly cluster up")
        state = _read(state_path)
        zk = state.zookeeper
        rows: list[list[str]] = []
        if zk.pid is not None and zk.marker is not None:
            rows.append(["zookeeper", "-", str(zk.pid), zk.connect, _state(owns(zk.pid, zk.marker))])
        else:
            rows.append(["zookeeper", "-", "-", zk.connect, "external"])
        for b in state.brokers:
            rows.append(["broker", str(b.id), str(b.pid), b.bootstrap, _state(owns(b.pid, b.marker))])
        print_table(["PROCESS", "ID", "PID", "ADDRESS", "STATE"], rows)
        typer.echo(f"bootstrap servers: {state.bootstrap}")


def _state(alive: bool) -> str:
    return "running" if alive else "stopped"


def _read(path: Path) -> ClusterFile:
    try:
        return ClusterFile.read(path)
    except ClusterFileError as e:
        fail(f"{path}: {e}")


def _running(state: ClusterFile) -> bool:
    zk = state.zookeeper
    if zk.pid is not None and zk.marker is not None and owns(zk.pid, zk.marker):
        return True
    return any(owns(b.pid, b.marker) for b in state.brokers)
