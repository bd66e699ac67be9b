"""Partition logs on local disk: segments and indexes, producer state, recovery, retention, compaction.

Plain synchronous file I/O (no asyncio, no sockets); time comes from an injected `exactly.clock.Clock`.
Entry points: `log_manager.LogManager` (all partitions of a data directory) and `log.PartitionLog`.
"""
