from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

import exactly
from exactly.compiled import COMPILED_MODULES, compiled_modules
from exactly.testing.processes import BrokerProcess
from exactly.testing.zookeeper import ZooKeeperProcess

# No per-example deadline: the suite must pass on a loaded 2-core machine, where one example of an
# otherwise quick property can take a few hundred milliseconds (Hypothesis still bounds each test).
settings.register_profile("exactly", deadline=None)
settings.load_profile("exactly")

# Subprocesses (the broker, the CLI, client workers) import the code these tests import: this checkout's
# `src`, whichever tree the editable install points at (tests of one work tree never run another tree's
# broker), or the compiled build when `make pytest-compiled` puts it first on pytest's path.
_ROOT = Path(__file__).resolve().parent.parent
_PACKAGE_ROOT = Path(exactly.__file__).resolve().parent.parent
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(_PACKAGE_ROOT), str(_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
)


def pytest_sessionstart(session: pytest.Session) -> None:
    """`EXACTLY_EXPECT_COMPILED=1` (`make pytest-compiled`): stop before any test unless every module of
    `exactly.compiled.COMPILED_MODULES` is loaded from its C extension."""
    if os.environ.get("EXACTLY_EXPECT_COMPILED") == "1":
        missing = sorted(set(COMPILED_MODULES) - set(compiled_modules()))
        if missing:
            raise pytest.UsageError(f"EXACTLY_EXPECT_COMPILED=1 but these run as pure Python: {missing}")


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
