"""How exactly's broker-config catalogue compares with a Kafka release's: the configs of Kafka's
"Broker Configs" documentation page (`docs/generated/kafka_config.html` of a Kafka build or of the
kafka-site repository, e.g. `40/generated/kafka_config.html`) that the catalogue lacks, and those whose
type, default or update mode differ.

    python -m tools.broker_catalogue KAFKA_CONFIG_HTML
"""

from __future__ import annotations

import argparse
import html
import re
from dataclasses import dataclass
from pathlib import Path

from exactly.configs import BROKER_CONFIGS

_ITEM = re.compile(r'<li>\s*<h4><a id="([^"]+)"></a>.*?<table><tbody>(.*?)</tbody></table>', re.S)
_ROW = re.compile(r"<tr><th>([^<]+):</th><td>(.*?)</td></tr>", re.S)


@dataclass(frozen=True, slots=True)
class KafkaConfig:
    """One config as Kafka documents it."""

    name: str
    type: str  # "int", "list", ...
    default: str | None  # None: no default or null
    update_mode: str  # "read-only", "per-broker", "cluster-wide"


def parse(page: str) -> list[KafkaConfig]:
    """The configs of a `kafka_config.html` page, in its order."""
    out = []
    for name, table in _ITEM.findall(page):
        row = {key: html.unescape(value) for key, value in _ROW.findall(table)}
        default = re.sub(r" \(.*\)$", "", row.get("Default", ""))
        out.append(
            KafkaConfig(
                name,
                row.get("Type", ""),
                None if default in ("", "null") else ("" if default == '""' else default),
                row.get("Update Mode", ""),
            )
        )
    return out


def differences(kafka: list[KafkaConfig]) -> tuple[list[str], list[str]]:
    """(the missing names, one line per config whose type, default or update mode differs)."""
    missing = [c.name for c in kafka if c.name not in BROKER_CONFIGS]
    differ = []
    for config in kafka:
        ours = BROKER_CONFIGS.get(config.name)
        if ours is None:
            continue
        mode = "read-only" if not ours.dynamic else "per-broker" if ours.per_broker else "cluster-wide"
        mine = (ours.type.name.lower(), ours.default, mode)
        theirs = (config.type, config.default, config.update_mode)
        if mine != theirs:
            differ.append(f"{config.name}: exactly {mine}, Kafka {theirs}")
    return missing, differ


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("page", type=Path, help="Kafka's kafka_config.html")
    args = parser.parse_args()
    kafka = parse(args.page.read_text())
    missing, differ = differences(kafka)
    print(f"Kafka: {len(kafka)} broker configs; exactly's catalogue: {len(BROKER_CONFIGS)}")
    print(f"missing ({len(missing)}):", *missing, sep="\n  ")
    print(f"different ({len(differ)}):", *differ, sep="\n  ")


if __name__ == "__main__":
    main()
