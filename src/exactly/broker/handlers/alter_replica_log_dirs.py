"""AlterReplicaLogDirs (key 34, v1-2): move replicas of this broker to another of its log dirs.

As Kafka's `ReplicaManager.alterReplicaLogDirs`, per partition: CLUSTER_AUTHORIZATION_FAILED for every
partition without ALTER on the cluster (when ACLs are on); LOG_DIR_NOT_FOUND when the path is not one of
this broker's log dirs; KAFKA_STORAGE_ERROR when that dir (or the replica) is offline;
REPLICA_NOT_AVAILABLE when the broker has no replica of the partition; otherwise NONE, and the replica is
copied into the target dir in the background while it keeps serving, then swapped in (storage/
log_manager.py). A replica already in the target dir: NONE, nothing happens (a move of it under way
elsewhere is abandoned). The answer does not wait for the move: DescribeLogDirs shows it (is_future_key).
"""

from __future__ import annotations

import logging

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.broker.replica_manager import ReplicaManager
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
)

log = logging.getLogger(__name__)

_ANSWERED = frozenset(
    {ErrorCode.LOG_DIR_NOT_FOUND, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.REPLICA_NOT_AVAILABLE}
)


@handler(ApiKey.ALTER_REPLICA_LOG_DIRS)
async def handle(ctx: RequestContext, request: AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse:
    allowed = authz.allowed(ctx, ApiKey.ALTER_REPLICA_LOG_DIRS, "cluster")
    replicas = ctx.broker.replicas
    results: dict[str, list[AlterReplicaLogDirPartitionResult]] = {}
    for log_dir in request.dirs:
        for topic in log_dir.topics:
            for index in topic.partitions:
                code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                if allowed:
                    code = _move(replicas, topic.name, index, log_dir.path)
                results.setdefault(topic.name, []).append(AlterReplicaLogDirPartitionResult(index, code))
    return AlterReplicaLogDirsResponse(
        results=[AlterReplicaLogDirTopicResult(name, partitions) for name, partitions in results.items()]
    )


def _move(replicas: ReplicaManager, topic: str, index: int, path: str) -> ErrorCode:
    try:
        replicas.alter_log_dir(topic, index, path)
    except KafkaError as e:
        if e.code in _ANSWERED:
            return e.code
        log.warning("AlterReplicaLogDirs of %s-%d to %s failed: %s", topic, index, path, e)
        return ErrorCode.UNKNOWN_SERVER_ERROR
    except OSError as e:
        log.warning("AlterReplicaLogDirs of %s-%d to %s failed: %s", topic, index, path, e)
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.NONE
