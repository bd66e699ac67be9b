from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from exactly.testing.processes import BrokerProcess

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
