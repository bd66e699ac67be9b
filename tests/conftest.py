from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from exactly.testing.processes import BrokerProcess
from exactly.testing.zookeeper import ZooKeeperProcess

# Subprocesses (the broker, the CLI, client workers) import this checkout's code, whichever tree the
# editable install points at: tests of one work tree never run another tree's broker.
_ROOT = Path(__file__).resolve().parent.parent
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(_ROOT / "src"), str(_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A fresh `exactly serve` process with its own data directory."""
    with BrokerProcess(tmp_path / "data") as proc:
        yield proc


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    """One real ZooKeeper for the whole run, started when a test first asks for it. Tests share it through
    `zk_connect`'s chroots; a test that stops or restarts a server runs its own ZooKeeperProcess."""
    with ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture
def zk_connect(zookeeper_server: ZooKeeperProcess) -> str:
    """A connect string into the shared ZooKeeper under a fresh chroot ("127.0.0.1:<port>/t-<uuid8>"), so that
    no test sees another's nodes. `exactly.broker.zookeeper.ZooKeeper` creates the chroot when it starts."""
    return f"{zookeeper_server.connect_string}/t-{uuid.uuid4().hex[:8]}"
