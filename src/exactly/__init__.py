"""exactly: a Kafka-wire-compatible broker built for exactly-once semantics."""

__version__ = "0.1.0"
