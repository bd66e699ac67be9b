"""Client quotas (Kafka's KIP-13/KIP-55/KIP-546): which quota applies to whom, and how fast they went."""
