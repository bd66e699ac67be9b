"""One thin module per Kafka API; importing this package registers them all with the dispatcher."""

from exactly.broker.handlers import api_versions, metadata

__all__ = ["api_versions", "metadata"]
