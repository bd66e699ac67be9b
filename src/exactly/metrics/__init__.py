"""The broker's counters: plain integers and fixed-bucket histograms kept by the objects that do the work
(a request, a produce, an fsync), read at scrape time by the Prometheus collector
(`exactly.broker.metrics`). Nothing here formats or serves metrics, and nothing here knows the broker.

* `histogram.Histogram`: a latency histogram with fixed upper bounds (one `bisect` and two additions
  per observation; Prometheus' cumulative buckets are computed when read).
* `stats`: per-topic produce/fetch counters (Kafka's BrokerTopicMetrics), per-request-type counters and
  time histograms (Kafka's RequestMetrics), per-listener connection counters (Kafka's socket server
  metrics) and the error codes a response carries.
"""

from exactly.metrics.histogram import Histogram
from exactly.metrics.stats import BrokerStats, ListenerStats, RequestStats, RequestTiming, TopicStats

__all__ = ["BrokerStats", "Histogram", "ListenerStats", "RequestStats", "RequestTiming", "TopicStats"]
