"""docs/metrics.md names every metric the Grafana dashboard queries, and the dashboard is valid JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_metric_of_the_dashboard_is_documented() -> None:
    dashboard = json.loads((ROOT / "docs/grafana/exactly.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    names = {
        re.sub(r"_(bucket|total)$", "", name)
        for expr in exprs
        for name in re.findall(r"\b(?:kafka|exactly)_\w+", expr)
    }
    documented = (ROOT / "docs/metrics.md").read_text()
    assert names
    assert sorted(n for n in names if n not in documented) == []
