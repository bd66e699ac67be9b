"""How much of `Broker` the request handlers reach: the distinct attributes read through `ctx.broker`
(or a local alias of it, or a parameter named `broker`) in `broker/handlers/` and the helpers handlers
share (`guard.py`, `config_changes.py`, `throttling.py`). Fewer means handlers depend on narrow services
(`replicas`, `topics`, `groups`, ...) rather than on everything the broker holds.

    python -m tools.broker_reach [SRC]      # SRC: the `src` directory (default: this checkout's)
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter
from pathlib import Path

SHARED = ("guard.py", "config_changes.py", "throttling.py")


def _is_ctx_broker(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "broker"
        and isinstance(node.value, ast.Name)
        and node.value.id == "ctx"
    )


def reach(broker_package: Path) -> Counter[str]:
    files = sorted((broker_package / "handlers").glob("*.py")) + [broker_package / n for n in SHARED]
    found: Counter[str] = Counter()
    for path in files:
        if not path.exists():
            continue
        tree = ast.parse(path.read_text(), str(path))
        aliases = {"broker"}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and _is_ctx_broker(node.value):
                aliases.update(t.id for t in node.targets if isinstance(t, ast.Name))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and (
                _is_ctx_broker(node.value) or (isinstance(node.value, ast.Name) and node.value.id in aliases)
            ):
                found[node.attr] += 1
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("src", nargs="?", default=str(Path(__file__).resolve().parent.parent / "src"))
    args = parser.parse_args()
    found = reach(Path(args.src) / "exactly" / "broker")
    print(f"{len(found)} distinct Broker attributes reached by handlers:")
    for name, uses in sorted(found.items()):
        print(f"  {name:<24} {uses:>3} uses")


if __name__ == "__main__":
    main()
