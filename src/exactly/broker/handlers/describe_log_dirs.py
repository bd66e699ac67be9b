"""DescribeLogDirs (key 35): every log dir of the broker, each partition's size on disk, free space.

As Kafka's ReplicaManager.describeLogDirs: one result per log dir in `log.dirs` order; `topics` null means
every partition; partitions that do not exist here are left out (no error); a partition's size is the sum
of its segment files (indexes not counted). A replica being moved to another dir (AlterReplicaLogDirs)
shows in both: its current log (offset_lag 0: this broker leads, so the high watermark never trails its
own log end) and, in the target dir, its future log (is_future_key true, offset_lag: how far its end is
behind the current log's end). total_bytes / usable_bytes (v4+) are each dir's file system's, -1 below
v4 (the field is not on the wire). An offline dir, or one whose file system cannot be asked, gives
KAFKA_STORAGE_ERROR and no topics.
"""

from __future__ import annotations

import logging
from pathlib import Path

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.describe_log_dirs import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)

log = logging.getLogger(__name__)


@handler(ApiKey.DESCRIBE_LOG_DIRS)
async def handle(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    logs = ctx.broker.replicas.logs
    if not authz.allowed(ctx, ApiKey.DESCRIBE_LOG_DIRS, "cluster"):
        return DescribeLogDirsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[])
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    results: list[DescribeLogDirsResult] = []
    for info in logs.describe(wanted):
        if info.error is not None:
            results.append(DescribeLogDirsResult(ErrorCode.KAFKA_STORAGE_ERROR, info.path))
            continue
        try:
            space = logs.disk_space(Path(info.path))
        except OSError as e:
            log.warning("cannot describe log dir %s: %s", info.path, e)
            results.append(DescribeLogDirsResult(ErrorCode.KAFKA_STORAGE_ERROR, info.path))
            continue
        by_topic: dict[str, list[DescribeLogDirsPartition]] = {}
        for replica in info.replicas:
            by_topic.setdefault(replica.topic, []).append(
                DescribeLogDirsPartition(
                    replica.partition,
                    replica.size,
                    offset_lag=replica.offset_lag,
                    is_future_key=replica.is_future,
                )
            )
        results.append(
            DescribeLogDirsResult(
                ErrorCode.NONE,
                info.path,
                [DescribeLogDirsTopic(name, partitions) for name, partitions in by_topic.items()],
                total_bytes=space.total_bytes,
                usable_bytes=space.usable_bytes,
            )
        )
    return DescribeLogDirsResponse(error_code=ErrorCode.NONE, results=results)
