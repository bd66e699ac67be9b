"""Kafka's ClientQuotaManager for one byte-rate quota (produce or fetch): record what a client moved and
say how long to throttle it.

Usage is counted per (user, client-id) tags of the quota that applies (see entities.resolve); a value is
recorded first, then the rate is checked, and a rate above the bound gives
`throttle = (rate - bound) / bound * window` ms, where window is the time the rate is measured over
(QuotaUtils.throttleTime). Sans-IO: time comes in as milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from exactly.quotas.entities import QuotaEntity, QuotaKey, resolve
from exactly.quotas.rate import SampledRate

# Without SASL every client is Kafka's anonymous principal.
ANONYMOUS = "ANONYMOUS"


class ClientQuotaManager:
    def __init__(
        self,
        key: QuotaKey,
        quotas: Callable[[], Mapping[QuotaEntity, Mapping[str, float]]],
        samples: int = 11,
        window_ms: int = 1000,
    ) -> None:
        self.key = key
        self._quotas = quotas
        self.samples = samples
        self.window_ms = window_ms
        self._sensors: dict[tuple[str, str], SampledRate] = {}

    def _sensor(self, user: str, client_id: str) -> tuple[float, SampledRate] | None:
        quotas = self._quotas()
        if not quotas:
            return None
        quota = resolve(quotas, self.key.value, user, client_id)
        if quota is None:
            return None
        tags = (quota.user_tag, quota.client_tag)
        sensor = self._sensors.get(tags)
        if sensor is None:
            sensor = self._sensors[tags] = SampledRate(self.samples, self.window_ms)
        return quota.bound, sensor

    def record_and_get_throttle_ms(self, client_id: str | None, value: float, now_ms: int) -> int:
        """Record `value` bytes for the client; the throttle in ms (0 within its quota or without one)."""
        found = self._sensor(ANONYMOUS, client_id or "")
        if found is None:
            return 0
        bound, sensor = found
        sensor.record(value, now_ms)
        rate = sensor.measure(now_ms)
        if rate <= bound:
            return 0
        return round((rate - bound) / bound * sensor.window_size_ms(now_ms))

    def unrecord(self, client_id: str | None, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled fetch returns no data, as in Kafka)."""
        found = self._sensor(ANONYMOUS, client_id or "")
        if found is not None:
            found[1].record(-value, now_ms)

    def max_value_in_window(self, client_id: str | None) -> float | None:
        """The most a client may move in one quota window (Kafka caps a fetch's max_bytes with it)."""
        quotas = self._quotas()
        quota = resolve(quotas, self.key.value, ANONYMOUS, client_id or "") if quotas else None
        if quota is None:
            return None
        return quota.bound * (self.samples - 1) * self.window_ms / 1000
