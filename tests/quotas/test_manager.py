"""The quota managers: throttle times as Kafka computes them, per-client counting under a default quota,
request-time percentages (KIP-124) and controller mutation token buckets (KIP-599), on a manual clock."""

from __future__ import annotations

import pytest

from exactly.errors import ErrorCode, KafkaError
from exactly.quotas.entities import CLIENT_ID, USER, QuotaEntity, QuotaKey, make_entity
from exactly.quotas.manager import ClientQuotaManager, ControllerMutationQuotaManager, RequestQuotaManager

P = QuotaKey.PRODUCER_BYTE_RATE


def manager(quotas: dict[QuotaEntity, dict[str, float]]) -> ClientQuotaManager:
    return ClientQuotaManager(P, lambda: quotas, samples=11, window_ms=1000)


def test_no_quota_no_throttle() -> None:
    m = manager({})
    assert m.record_and_get_throttle_ms("c", 10**9, 0) == 0
    assert m.max_value_in_window("c") is None


def test_throttle_is_the_excess_over_the_bound_times_the_window() -> None:
    m = manager({make_entity([(CLIENT_ID, "c")]): {P.value: 1000.0}})
    # 10 s minimum window at 1000 B/s: 10,000 bytes fit exactly.
    assert m.record_and_get_throttle_ms("c", 10_000, 0) == 0
    # 15,000 bytes over 10 s = 1500 B/s: (1500 - 1000) / 1000 * 10,000 ms.
    assert m.record_and_get_throttle_ms("c", 5_000, 0) == 5_000
    assert m.max_value_in_window("c") == pytest.approx(10_000)
    # Other clients have no quota.
    assert m.record_and_get_throttle_ms("other", 10**9, 0) == 0


def test_unrecord_takes_a_value_back() -> None:
    m = manager({make_entity([(CLIENT_ID, "c")]): {P.value: 1000.0}})
    assert m.record_and_get_throttle_ms("c", 20_000, 0) == 10_000
    m.unrecord("c", 20_000, 0)
    assert m.record_and_get_throttle_ms("c", 10_000, 0) == 0


def test_a_default_quota_counts_each_client_on_its_own() -> None:
    m = manager({make_entity([(CLIENT_ID, None)]): {P.value: 1000.0}})
    assert m.record_and_get_throttle_ms("a", 10_000, 0) == 0
    assert m.record_and_get_throttle_ms("b", 10_000, 0) == 0
    assert m.record_and_get_throttle_ms("a", 1_000, 0) == 1_000
    assert m.record_and_get_throttle_ms(None, 10_000, 0) == 0  # no client id is the client id ""


R = QuotaKey.REQUEST_PERCENTAGE
M = QuotaKey.CONTROLLER_MUTATION_RATE


def test_request_time_is_a_percentage_of_one_thread() -> None:
    quotas: dict[QuotaEntity, dict[str, float]] = {make_entity([(CLIENT_ID, "c")]): {R.value: 10.0}}
    m = RequestQuotaManager(lambda: quotas, samples=11, window_ms=1000)
    # 10 % of one thread over the 10 s minimum window: 1 s of handling fits exactly.
    assert m.record_and_get_throttle_ms("ANONYMOUS", "c", 1.0, 0) == 0
    # 1.5 s over 10 s = 15 %: (15 - 10) / 10 * 10,000 ms, capped at one quota window (Kafka's bound).
    assert m.record_and_get_throttle_ms("ANONYMOUS", "c", 0.5, 0) == 1_000
    assert m.record_and_get_throttle_ms("ANONYMOUS", "other", 100.0, 0) == 0  # no quota


def test_request_time_within_the_window_cap() -> None:
    quotas: dict[QuotaEntity, dict[str, float]] = {make_entity([(CLIENT_ID, "c")]): {R.value: 100.0}}
    m = RequestQuotaManager(lambda: quotas, samples=2, window_ms=1000)
    # 1.2 s of handling in the 1 s minimum window: 120 % of a thread, (120 - 100) / 100 * 1000 ms.
    assert m.record_and_get_throttle_ms("ANONYMOUS", "c", 1.2, 0) == 200


def test_request_quota_by_user() -> None:
    quotas: dict[QuotaEntity, dict[str, float]] = {make_entity([(USER, "alice")]): {R.value: 1.0}}
    m = RequestQuotaManager(lambda: quotas, samples=2, window_ms=1000)
    assert m.record_and_get_throttle_ms("alice", "any", 0.02, 0) == 1_000
    assert m.record_and_get_throttle_ms("bob", "any", 0.02, 0) == 0


def test_no_quotas_at_all_cost_nothing() -> None:
    m = RequestQuotaManager(lambda: {}, samples=2, window_ms=1000)
    assert m.record_and_get_throttle_ms("ANONYMOUS", "c", 100.0, 0) == 0


class ManualClock:
    def __init__(self) -> None:
        self.ms = 0

    def __call__(self) -> int:
        return self.ms


def mutations(rate: float) -> tuple[ControllerMutationQuotaManager, ManualClock]:
    quotas: dict[QuotaEntity, dict[str, float]] = {make_entity([(CLIENT_ID, "c")]): {M.value: rate}}
    return ControllerMutationQuotaManager(lambda: quotas, samples=11, window_ms=1000), ManualClock()


def test_a_strict_mutation_quota_refuses_once_the_bucket_is_below_zero() -> None:
    m, clock = mutations(2.0)  # burst 20 partitions
    quota = m.new_quota("ANONYMOUS", "c", strict=True, now_ms=clock)
    quota.record(15)  # 20 -> 5
    quota.record(10)  # 5 >= 0: accepted, 5 -> -5
    with pytest.raises(KafkaError) as refused:
        quota.record(1)
    assert refused.value.code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert refused.value.message == "The throttling quota has been exceeded."
    assert quota.throttle_time_ms == 2_500  # 5 tokens at 2/s
    clock.ms = 2_000  # -5 + 4 = -1: still refused, 500 ms to go
    later = m.new_quota("ANONYMOUS", "c", strict=True, now_ms=clock)
    with pytest.raises(KafkaError):
        later.record(1)
    assert later.throttle_time_ms == 500
    clock.ms = 2_500  # back at zero
    later.record(1)
    # The bucket is per client: another client with the same default would have its own.
    assert m.new_quota("ANONYMOUS", "other", strict=True, now_ms=clock).throttle_time_ms == 0


def test_a_permissive_mutation_quota_records_everything_and_reports_a_throttle() -> None:
    m, clock = mutations(2.0)
    quota = m.new_quota("ANONYMOUS", "c", strict=False, now_ms=clock)
    quota.record(20)
    assert quota.throttle_time_ms == 0
    quota.record(6)
    assert quota.throttle_time_ms == 3_000
    quota.record(2)
    assert quota.throttle_time_ms == 4_000


def test_no_mutation_quota_never_refuses() -> None:
    m = ControllerMutationQuotaManager(lambda: {}, samples=11, window_ms=1000)
    quota = m.new_quota("ANONYMOUS", "c", strict=True, now_ms=lambda: 0)
    for _ in range(100):
        quota.record(1_000)
    assert quota.throttle_time_ms == 0
