"""The hot-path counters: a histogram's cumulative buckets count every observation at or below each bound,
and the error codes of a response are found at every level of its structure."""

from __future__ import annotations

import threading

from hypothesis import given
from hypothesis import strategies as st

from exactly.metrics.histogram import MS_BUCKETS, Histogram
from exactly.metrics.stats import BrokerStats, RequestTiming, error_codes
from exactly.protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData
from exactly.protocol.messages.produce import PartitionProduceResponse, ProduceResponse, TopicProduceResponse

values = st.floats(min_value=0, max_value=100_000, allow_nan=False)


@given(st.lists(values, max_size=200))
def test_cumulative_buckets_count_every_observation_at_or_below_their_bound(observed: list[float]) -> None:
    histogram = Histogram(MS_BUCKETS)
    for value in observed:
        histogram.observe(value)
    buckets = histogram.cumulative()
    assert [bound for bound, _ in buckets] == [*MS_BUCKETS, float("inf")]
    for bound, count in buckets:
        assert count == sum(1 for v in observed if v <= bound)
    assert histogram.count == len(observed) == buckets[-1][1]
    assert abs(histogram.sum - sum(observed)) < 1e-6 * max(1.0, sum(observed))


def test_bounds_must_increase() -> None:
    for bad in ((1, 1), (2, 1)):
        try:
            Histogram(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad} accepted")


def test_a_locked_histogram_loses_no_observation_from_threads() -> None:
    histogram = Histogram((1.0,), locked=True)

    def work() -> None:
        for _ in range(10_000):
            histogram.observe(0.5)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert histogram.cumulative() == [(1.0, 40_000), (float("inf"), 40_000)]


@given(st.lists(st.lists(st.sampled_from([0, 3, 6, 87]), max_size=5), max_size=5))
def test_error_codes_are_found_in_every_partition(codes: list[list[int]]) -> None:
    response = ProduceResponse(
        [
            TopicProduceResponse(
                f"t{i}", partition_responses=[PartitionProduceResponse(p, c) for p, c in enumerate(t)]
            )
            for i, t in enumerate(codes)
        ]
    )
    assert sorted(error_codes(response)) == sorted(c for t in codes for c in t)


def test_a_fetch_response_counts_its_own_code_and_each_partitions() -> None:
    response = FetchResponse(
        error_code=0,
        responses=[FetchableTopicResponse("t", partitions=[PartitionData(0, 0), PartitionData(1, 1)])],
    )
    assert sorted(error_codes(response)) == [0, 0, 1]
    assert error_codes(b"pre-encoded") == []


def test_request_stats_count_versions_errors_and_timings_under_the_pseudo_type_too() -> None:
    stats = BrokerStats()
    timing = RequestTiming(1, received=10.0, also=-1)
    stats.received(1, 12, -1)
    timing.started, timing.local, timing.finished = 10.001, 0.0005, 10.011
    stats.answered(timing, FetchResponse(error_code=0))
    stats.completed(timing, sent=10.012, send_done=10.012)
    for key in (1, -1):
        request = stats.requests[key]
        assert request.requests == {12: 1}
        assert request.errors == {0: 1}
        assert round(request.total.sum, 6) == 12.0
        assert round(request.queue.sum, 6) == 1.0
        assert round(request.local.sum, 6) == 0.5
        assert round(request.remote.sum, 6) == 9.5
        assert round(request.response_queue.sum, 6) == 1.0


def test_all_topics_adds_up_the_topics() -> None:
    stats = BrokerStats()
    stats.topic("a").appended(3, 100)
    stats.topic("b").appended(2, 50)
    stats.topic("b").produce_requests(2, 1)
    totals = dict(zip(("messages_in", "bytes_in"), stats.all_topics()[:2], strict=True))
    assert totals == {"messages_in": 5, "bytes_in": 150}
    assert stats.topic("b").failed_produce_requests == 1


def test_a_forgotten_topic_keeps_its_counts_in_the_sums() -> None:
    stats = BrokerStats()
    stats.topic("a").appended(3, 100)
    stats.topic("b").appended(2, 50)
    stats.forget_topic("a")
    assert list(stats.topics) == ["b"]
    assert stats.all_topics()[:2] == (5, 150)
