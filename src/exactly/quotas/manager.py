"""Kafka's quota managers: record what a client used and say how long to throttle it. Sans-IO: time comes
in as milliseconds.

* `ClientQuotaManager`: one rate quota, a byte rate (produce, fetch) or the request-time percentage.
  Usage is counted per (user, client-id) tags of the quota that applies (see entities.resolve); a value
  is recorded first, then the rate is checked, and a rate above the bound gives
  `throttle = (rate - bound) / bound * window` ms, where window is the time the rate is measured over
  (QuotaUtils.throttleTime), at most `max_throttle_ms` when given.
* `RequestQuotaManager` (KIP-124, Kafka's ClientRequestQuotaManager): `request_percentage`, the time a
  client's requests took to handle per quota window as a percentage of one thread (100 = one thread
  busy the whole time). A request's handling time in seconds is recorded as `seconds * 100`, so the rate
  per second is the percentage; a throttle is at most one quota window, as in Kafka.
* `ControllerMutationQuotaManager` (KIP-599): `controller_mutation_rate`, partitions created, added or
  deleted per second, measured by a token bucket (rate.TokenBucket) of burst `rate * (samples - 1) *
  window`. A request gets a `ControllerMutationQuota`: a strict one (CreateTopics v6+, CreatePartitions
  v3+, DeleteTopics v5+) refuses a topic with THROTTLING_QUOTA_EXCEEDED while the bucket is below zero,
  before recording, so a topic is accepted while any token is left and may take the bucket below zero;
  a permissive one (older versions) records everything and only reports a throttle time. The throttle
  is the time the bucket takes to refill to zero: `-tokens / rate` seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from exactly.errors import ErrorCode, KafkaError
from exactly.quotas.entities import QuotaEntity, QuotaKey, resolve
from exactly.quotas.rate import SampledRate, TokenBucket

# Without SASL every client is Kafka's anonymous principal.
ANONYMOUS = "ANONYMOUS"


class ClientQuotaManager:
    def __init__(
        self,
        key: QuotaKey,
        quotas: Callable[[], Mapping[QuotaEntity, Mapping[str, float]]],
        samples: int = 11,
        window_ms: int = 1000,
        max_throttle_ms: int | None = None,
    ) -> None:
        self.key = key
        self._quotas = quotas
        self.samples = samples
        self.window_ms = window_ms
        self.max_throttle_ms = max_throttle_ms
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

    def record_and_get_throttle_ms(
        self, client_id: str | None, value: float, now_ms: int, user: str = ANONYMOUS
    ) -> int:
        """Record `value` (bytes) for the client; the throttle in ms (0 within its quota or without one)."""
        found = self._sensor(user, client_id or "")
        if found is None:
            return 0
        bound, sensor = found
        sensor.record(value, now_ms)
        rate = sensor.measure(now_ms)
        if rate <= bound:
            return 0
        throttle = round((rate - bound) / bound * sensor.window_size_ms(now_ms))
        return throttle if self.max_throttle_ms is None else min(throttle, self.max_throttle_ms)

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


class RequestQuotaManager:
    """`request_percentage` (KIP-124): handling time recorded per client, a throttle when over."""

    def __init__(
        self,
        quotas: Callable[[], Mapping[QuotaEntity, Mapping[str, float]]],
        samples: int = 11,
        window_ms: int = 1000,
    ) -> None:
        self._quotas = quotas
        self._rates = ClientQuotaManager(
            QuotaKey.REQUEST_PERCENTAGE, quotas, samples, window_ms, max_throttle_ms=window_ms
        )

    @property
    def active(self) -> bool:
        """Whether any client quota is set (without one, nothing is recorded and nothing throttled)."""
        return bool(self._quotas())

    def record_and_get_throttle_ms(
        self, user: str, client_id: str | None, handling_s: float, now_ms: int
    ) -> int:
        """Record a request that took `handling_s` seconds to handle; the throttle in ms (0: none)."""
        if not self._quotas():
            return 0
        return self._rates.record_and_get_throttle_ms(client_id, handling_s * 100, now_ms, user)


THROTTLING_MESSAGE = "The throttling quota has been exceeded."


class ControllerMutationQuota:
    """One request's view of its client's controller mutation quota (Kafka's ControllerMutationQuota)."""

    def __init__(self, bucket: TokenBucket | None, rate: float, strict: bool, now_ms: Callable[[], int]):
        self._bucket = bucket
        self._rate = rate
        self.strict = strict
        self._now_ms = now_ms
        self.throttle_time_ms = 0  # the response's throttle_time_ms (and how long the connection is muted)

    def record(self, partitions: int) -> None:
        """Count `partitions` mutated; a strict quota whose bucket is below zero refuses them instead
        (KafkaError THROTTLING_QUOTA_EXCEEDED, nothing counted)."""
        bucket = self._bucket
        if bucket is None:
            return
        now = self._now_ms()
        if self.strict:
            tokens = bucket.tokens(self._rate, now)
            if tokens < 0:
                self.throttle_time_ms = max(self.throttle_time_ms, self._throttle(tokens))
                raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLING_MESSAGE)
            bucket.record(partitions, self._rate, now)
            return
        bucket.record(partitions, self._rate, now)
        tokens = bucket.tokens(self._rate, now)
        if tokens < 0:
            self.throttle_time_ms = max(self.throttle_time_ms, self._throttle(tokens))

    def _throttle(self, tokens: float) -> int:
        return round(-tokens / self._rate * 1000)


class ControllerMutationQuotaManager:
    """`controller_mutation_rate` (KIP-599): one token bucket per (user, client-id) tags."""

    def __init__(
        self,
        quotas: Callable[[], Mapping[QuotaEntity, Mapping[str, float]]],
        samples: int = 11,
        window_ms: int = 1000,
    ) -> None:
        self._quotas = quotas
        self.samples = samples
        self.window_ms = window_ms
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def new_quota(
        self, user: str, client_id: str | None, *, strict: bool, now_ms: Callable[[], int]
    ) -> ControllerMutationQuota:
        """The quota of one request (`strict`: its version refuses what does not fit)."""
        quotas = self._quotas()
        quota = (
            resolve(quotas, QuotaKey.CONTROLLER_MUTATION_RATE.value, user, client_id or "")
            if quotas
            else None
        )
        if quota is None:
            return ControllerMutationQuota(None, 0.0, strict, now_ms)
        tags = (quota.user_tag, quota.client_tag)
        bucket = self._buckets.get(tags)
        if bucket is None:
            bucket = self._buckets[tags] = TokenBucket(self.samples, self.window_ms)
        return ControllerMutationQuota(bucket, quota.bound, strict, now_ms)
