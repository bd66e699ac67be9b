"""A timed produce round against the real broker: one record in `SAMPLE_EVERY` has a delivery report, and
the topic must have grown by exactly the records the producers had delivered (a record that failed
without a report, or one that is not the round's, stops the round)."""

from __future__ import annotations

import pytest

from exactly.bench import rounds
from exactly.testing.processes import BrokerProcess

pytestmark = [pytest.mark.interop, pytest.mark.slow]

TOPIC = "bench-round"


def _create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, rounds.PARTITIONS, 1)]).values():
        future.result(60)


def test_a_round_counts_what_the_topic_took(broker: BrokerProcess) -> None:
    _create_topic(broker.bootstrap)
    made = rounds.produce_round(broker.bootstrap, TOPIC, 1, 0, 1, broker.pid)
    assert made.records > rounds.SAMPLE_EVERY
    assert rounds._records_in(broker.bootstrap, TOPIC) == made.records
    assert made.latencies_ms  # the sampled records' delivery latencies
    assert made.timeline.measured_bytes % (rounds.SAMPLE_EVERY * rounds.RECORD_SIZE) == 0
    assert made.timeline.measured_bytes > 0


def test_a_record_that_is_not_the_rounds_stops_it(
    broker: BrokerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One more record in the topic than the producers had delivered: the counts disagree."""
    from confluent_kafka import Producer

    _create_topic(broker.bootstrap)
    real = rounds._records_in
    counted: list[int] = []

    def records_in(bootstrap: str, topic: str) -> int:
        n = real(bootstrap, topic)
        if not counted:  # after the count before the round: a record of someone else
            other = Producer({"bootstrap.servers": bootstrap})
            other.produce(topic, b"not the round's", partition=0)
            assert other.flush(30) == 0
        counted.append(n)
        return n

    monkeypatch.setattr(rounds, "_records_in", records_in)
    with pytest.raises(RuntimeError, match=r"the producers had \d+ records delivered, the topic took \d+"):
        rounds.produce_round(broker.bootstrap, TOPIC, 1, 0, 1, broker.pid)
    assert len(counted) == 2
