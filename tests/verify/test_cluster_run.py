"""A short seeded `exactly verify run --brokers 3`: a ZooKeeper and three brokers behind their proxies, a
few workloads, the cluster's faults on a fast schedule: 0 anomalies, and the faults did happen (the
history names each, with the broker it hit; an isolated broker's session expired)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exactly.verify.checker import ANOMALY_CLASSES
from exactly.verify.history import OpType, complete_ops, history_files, read_history
from exactly.verify.nemesis import CLUSTER, Schedule
from exactly.verify.runner import Run, RunConfig

FAULTS = (
    "controller-kill",
    "coordinator-pause",
    "leader-kill",
    "isolate-broker",
    "rolling-restart",
    "zookeeper-restart",
)


@pytest.mark.slow
def test_a_short_cluster_run_survives_the_cluster_faults(tmp_path: Path) -> None:
    out = tmp_path / "run"
    config = RunConfig(
        out=out,
        duration=70,
        seed=38,  # the nemesis's first draw is isolate-broker, early enough to run to its end
        workloads=("queue", "copier", "bank", "idem"),
        faults=FAULTS,
        workers={"queue": 1, "copier": 1, "bank": 2, "idem": 1},
        copier_records=500,
        schedule=Schedule(2, 4, 1),
        progress=None,
        brokers=3,
    )
    summary = Run(config).execute()

    assert summary["anomalies"] == dict.fromkeys(ANOMALY_CLASSES, 0), summary["anomalies"]
    assert summary["ok"]
    assert summary["txns"]["committed"] > 50
    assert summary["stats"]["copier records in"] == summary["stats"]["copier records out"] > 0
    assert "--brokers 3" in summary["command"]
    assert json.loads((out / "summary.json").read_text())["faults"] == summary["faults"]

    ops = list(complete_ops(read_history(history_files(out))))
    faults = [o.value for o in ops if o.f == "fault" and o.type is OpType.OK]
    assert not [f for f in faults if "error" in f or "skipped" in f], faults
    assert faults[0]["kind"] == "isolate-broker"
    assert faults[0]["deregistered_after"] is not None, faults[0]
    kinds = {f["kind"] for f in faults}
    assert kinds <= set(CLUSTER)
    assert len(kinds) >= 3, faults
    for f in faults:
        if f["kind"] in ("controller-kill", "coordinator-pause", "leader-kill", "isolate-broker"):
            assert f["broker"] in (1, 2, 3), f
        if f["kind"] == "isolate-broker" and f["seconds"] >= 7.5:  # not cut short by the run's end
            assert f["deregistered_after"] is not None, f  # cut longer than the 6 s session
    killed = {f["broker"] for f in faults if f["kind"] in ("controller-kill", "leader-kill")}
    restarted = {o.value.get("broker") for o in ops if o.f == "restart"}
    assert killed <= restarted
    whole = [o.value for o in ops if o.f == "cluster-whole"]
    assert whole
    assert whole[-1]["missing"] == []
    for broker in (1, 2, 3):
        assert (out / "logs" / f"broker-{broker}.log").exists()
