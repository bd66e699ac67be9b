"""`ZooKeeperProcess`: Debian's ZooKeeper started from our own zoo.cfg, ready when it answers, quiet on our
console, freeing its port when stopped, and keeping its data through kill -9 and restart."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from kazoo.client import KazooClient

import exactly.testing.zookeeper as zookeeper_module
from exactly.testing.processes import accepts_connections
from exactly.testing.zookeeper import (
    ZooKeeperNotInstalled,
    ZooKeeperProcess,
    four_letter_word,
    zookeeper_classpath,
)

pytestmark = pytest.mark.timeout(60)


def test_config_is_written_as_documented(tmp_path: Path) -> None:
    server = ZooKeeperProcess(tmp_path / "zk", port=12345, tick_time_ms=200)
    lines = dict(line.split("=", 1) for line in server.config().splitlines())
    assert lines == {
        "tickTime": "200",
        "minSessionTimeout": "400",
        "maxSessionTimeout": "60000",
        "dataDir": str((tmp_path / "zk").resolve()),
        "clientPort": "12345",
        "clientPortAddress": "127.0.0.1",
        "admin.enableServer": "false",
        "4lw.commands.whitelist": "ruok,srvr,stat,mntr",
        "preAllocSize": "4096",
    }
    assert server.connect_string == "127.0.0.1:12345"


def test_missing_jars_are_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zookeeper_module, "JAR_DIRS", (tmp_path,))
    with pytest.raises(ZooKeeperNotInstalled, match="apt-get install zookeeper"):
        zookeeper_classpath()


def test_start_ruok_kill_restart_keeps_data_and_stop_frees_the_port(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    server = ZooKeeperProcess(tmp_path / "zk")
    with server:
        assert server.running
        assert server.ruok()
        assert "Mode: standalone" in four_letter_word(server.port, "srvr")
        assert (tmp_path / "zk" / "zoo.cfg").read_text() == server.config()
        pid = server.pid
        client = KazooClient(hosts=server.connect_string, timeout=18.0)
        client.start()
        try:
            client.create("/kept", b"data")
        finally:
            client.stop()
            client.close()

        server.kill()
        assert not server.running
        assert not accepts_connections(server.port)
        server.restart()
        assert server.pid != pid
        assert server.ruok()
        client = KazooClient(hosts=server.connect_string)
        client.start()
        try:
            assert client.get("/kept")[0] == b"data"
        finally:
            client.stop()
            client.close()

    assert not server.running
    assert not accepts_connections(server.port)
    with socket.socket() as s:  # free to listen on again (as a server does: past its TIME_WAIT connections)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", server.port))
        s.listen()
    assert "Starting server" in server.log_path.read_text()  # its log went to its file...
    out, err = capfd.readouterr()
    assert "zookeeper" not in (out + err).lower()  # ...and nothing to our console


def test_a_server_that_exits_at_once_reports_its_log(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = ZooKeeperProcess(tmp_path / "zk", port=taken.getsockname()[1])
        with pytest.raises(RuntimeError, match="ZooKeeper exited"):
            server.start()
