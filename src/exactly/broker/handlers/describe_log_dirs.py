"""DescribeLogDirs (key 35): the one log dir (the data dir), each partition's size on disk, free space.

As Kafka's ReplicaManager.describeLogDirs: `topics` null means every partition; partitions that do not
exist here are left out (no error); a partition's size is the sum of its segment files (indexes not
counted); offset_lag is 0 (this broker is the leader, so the high watermark never trails its own log
end) and is_future_key false (no replica is being moved between dirs). total_bytes / usable_bytes (v4+)
are the file system's, -1 below v4 (the field is not on the wire). A file system that cannot be asked
gives the dir KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

import logging

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
    by_topic: dict[str, list[DescribeLogDirsPartition]] = {}
    for (topic, partition), plog in sorted(logs.all_logs()):
        if wanted is not None and (topic, partition) not in wanted:
            continue
        by_topic.setdefault(topic, []).append(
            DescribeLogDirsPartition(partition, plog.size_in_bytes, offset_lag=0, is_future_key=False)
        )
    try:
        space = logs.disk_space()
    except OSError as e:
        log.warning("cannot describe log dir %s: %s", logs.absolute_path, e)
        failed = DescribeLogDirsResult(ErrorCode.KAFKA_STORAGE_ERROR, logs.absolute_path)
        return DescribeLogDirsResponse(results=[failed])
    result = DescribeLogDirsResult(
        ErrorCode.NONE,
        logs.absolute_path,
        [DescribeLogDirsTopic(name, partitions) for name, partitions in by_topic.items()],
        total_bytes=space.total_bytes,
        usable_bytes=space.usable_bytes,
    )
    return DescribeLogDirsResponse(error_code=ErrorCode.NONE, results=[result])
