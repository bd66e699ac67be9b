from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from exactly.testing.processes import BrokerProcess


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One `exactly serve` for a whole test module (each test uses its own topics)."""
    data: Path = tmp_path_factory.mktemp("cli-broker") / "data"
    with BrokerProcess(data) as proc:
        yield proc
