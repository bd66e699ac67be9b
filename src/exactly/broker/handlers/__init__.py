"""One thin module per Kafka API; importing this package registers them all with the dispatcher."""

from exactly.broker.handlers import (
    api_versions,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    fetch,
    incremental_alter_configs,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
)

__all__ = [
    "api_versions",
    "create_partitions",
    "create_topics",
    "delete_records",
    "delete_topics",
    "describe_cluster",
    "describe_configs",
    "fetch",
    "incremental_alter_configs",
    "init_producer_id",
    "list_offsets",
    "metadata",
    "offset_for_leader_epoch",
    "produce",
]
