"""KIP-848 consumer groups: the coordinator assigns partitions, members reconcile incrementally.

`manager.py` (ConsumerGroupHeartbeat, ConsumerGroupDescribe, timeouts, replay), `group.py` (one group's
stored state and what it derives), `reconciliation.py` (the member state machine), `assignors.py`
(`uniform`, `range`), `regex.py` (RE2 subscriptions), `records.py` (record types 3-8 in
`__consumer_offsets`). This package's `__init__` imports nothing, so that `group.records` can import
`consumer.records` without a cycle.
"""
