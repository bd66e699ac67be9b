"""The sans-IO rule (ARCHITECTURE invariant 1): the pure packages — codecs, storage, the coordinators'
state machines, replication — import neither asyncio nor `exactly.broker`, so they run and are tested
without an event loop, and only the broker's shell touches sockets."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import exactly

PURE = (
    "protocol",
    "records",
    "storage",
    "group",
    "txn",
    "replication",
    "fetch",
    "cluster",
    "quotas",
    "security",
    "console",
)
FORBIDDEN = ("asyncio", "exactly.broker", "uvloop", "socket")
ROOT = Path(exactly.__file__).parent


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("package", PURE)
def test_pure_packages_import_no_event_loop_and_no_broker(package: str) -> None:
    modules = sorted((ROOT / package).rglob("*.py"))
    assert modules, package
    offending = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in modules
        for name in _imports(path)
        if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN)
    }
    assert not offending, sorted(offending)
