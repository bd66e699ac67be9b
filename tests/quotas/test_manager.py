"""ClientQuotaManager: throttle times as Kafka computes them, per-client counting under a default quota."""

from __future__ import annotations

import pytest

from exactly.quotas.entities import CLIENT_ID, QuotaEntity, QuotaKey, make_entity
from exactly.quotas.manager import ClientQuotaManager

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
