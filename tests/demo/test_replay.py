"""The replay against the real broker: every planned flight committed exactly once, the planned aborts
invisible to read_committed, event time nearly ordered, and the end-of-input event last — also when the
broker is killed -9 in the middle of the replay and restarted on its data directory."""

from __future__ import annotations

import json
import time
from collections import Counter
from datetime import datetime
from typing import Any

import pytest

from exactly.demo.flights import SENTINEL_ID, flight_events, flights_frame
from exactly.demo.replay import Replay, ReplayPlan
from exactly.demo.topics import create_topic, last_stable_and_high, read_committed
from exactly.testing.processes import BrokerProcess

pytestmark = [pytest.mark.interop, pytest.mark.slow]

ROWS = 6000


@pytest.fixture(scope="module")
def frame() -> Any:
    return flights_frame()


def replay_and_read(
    broker: BrokerProcess, frame: Any, kill_at: int | None
) -> tuple[Replay, list[dict[str, Any]]]:
    create_topic(broker.bootstrap, "flights", 4)
    events = flight_events(frame, ROWS)
    plan = ReplayPlan.make(ROWS, transaction_rows=100, abort_every=10, seed=7)
    replay = Replay(broker.bootstrap, "flights", events, plan, producers=3, max_in_flight=3)
    replay.start()
    deadline = time.monotonic() + 180
    killed = False
    while not (progress := replay.progress()).finished:
        assert progress.error is None, progress.error
        assert time.monotonic() < deadline, progress
        if kill_at is not None and not killed and progress.rows_committed >= kill_at:
            broker.kill()
            broker.start()
            killed = True
        time.sleep(0.05)
    assert killed == (kill_at is not None)
    replay.commit_sentinel()
    replay.stop()
    records = [json.loads(v) for v in read_committed(broker.bootstrap, "flights")]
    return replay, records


def check_exactly_once(replay: Replay, records: list[dict[str, Any]]) -> None:
    progress = replay.progress()
    aborted = replay.aborted_ids()
    assert len(aborted) == 6 * 100  # 60 transactions of 100 flights: one in ten aborted
    expected = set(replay.events.ids) - aborted
    ids = Counter(r["id"] for r in records)
    assert [i for i, n in ids.items() if n > 1] == []
    assert set(ids) == expected | {SENTINEL_ID}
    assert progress.rows_committed == len(expected)
    assert progress.rows_aborted == len(aborted)
    assert (progress.transactions_committed, progress.transactions_aborted) == (54, 6)
    stable, high = last_stable_and_high(replay.bootstrap, "flights")
    assert stable == high  # nothing left open


def check_event_time_order(replay: Replay, records: list[dict[str, Any]]) -> None:
    """Within a carrier (offset order in its partition) event time never goes back further than the
    transactions in flight at once (3 x 100 flights) span: what the job's watermark delay must cover."""
    times = [json.loads(v)["scheduled_departure"] for v in replay.events.values]
    as_seconds = [datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() for t in times]
    bound = max(b - a for a, b in zip(as_seconds, as_seconds[300:], strict=False))
    by_carrier: dict[str, list[float]] = {}
    for r in records:
        if r["id"] != SENTINEL_ID:
            moment = datetime.fromisoformat(r["scheduled_departure"].replace("Z", "+00:00")).timestamp()
            by_carrier.setdefault(r["carrier"], []).append(moment)
    latest_step_back = 0.0
    for moments in by_carrier.values():
        newest = moments[0]
        for moment in moments:
            latest_step_back = max(latest_step_back, newest - moment)
            newest = max(newest, moment)
    assert 0 <= latest_step_back <= bound < 86_400


def test_replay_commits_each_planned_flight_once(broker: BrokerProcess, frame: Any) -> None:
    replay, records = replay_and_read(broker, frame, kill_at=None)
    check_exactly_once(replay, records)
    assert replay.progress().failed_attempts == 0
    check_event_time_order(replay, records)


def test_replay_survives_a_broker_kill(broker: BrokerProcess, frame: Any) -> None:
    replay, records = replay_and_read(broker, frame, kill_at=ROWS // 3)
    check_exactly_once(replay, records)
    check_event_time_order(replay, records)
