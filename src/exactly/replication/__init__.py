"""Replication's pure core: a partition's leadership, leader epoch and high watermark above its log.
Synchronous; nothing here imports asyncio or `exactly.broker`."""
