from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.broker import BrokerProcess


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A fresh `exactly serve` process with its own data directory."""
    with BrokerProcess(tmp_path / "data") as proc:
        yield proc
