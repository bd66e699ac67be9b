"""FindCoordinator (key 10): the coordinator of a group, a transactional id or (key type SHARE, v6+) a
share partition's state — this broker, or in a cluster the leader of the key's partition of
`__consumer_offsets` / `__transaction_state` / `__share_group_state`.

A SHARE key is `group:topicId:partition` (Kafka's share coordinator key); only brokers ask for it
(CLUSTER_ACTION, else CLUSTER_AUTHORIZATION_FAILED), and only while share groups are on.

v0-3 ask for one key, v4+ for a batch (`coordinator_keys`). A group key makes sure `__consumer_offsets`
exists (it is created on first use), so that the coordinator is ready when the client comes to it.
"""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)

GROUP = 0
TRANSACTION = 1
SHARE = 2


def _permitted(ctx: RequestContext, key_type: int, key: str) -> bool:
    if key_type == SHARE:
        return authz.allowed(ctx, ApiKey.FIND_COORDINATOR, "share")
    role = "group" if key_type == GROUP else "transactional_id"
    return authz.allowed(ctx, ApiKey.FIND_COORDINATOR, role, key)


def _refusal(key_type: int) -> ErrorCode:
    if key_type == GROUP:
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if key_type == SHARE:
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


@handler(ApiKey.FIND_COORDINATOR)
async def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    broker = ctx.broker
    keys = request.coordinator_keys if ctx.version >= 4 else [request.key]
    error = ErrorCode.NONE
    message: str | None = None
    share_ok = request.key_type == SHARE and ctx.version >= 6 and broker.config.group_share_enable
    if request.key_type not in (GROUP, TRANSACTION) and not share_ok:
        error, message = ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {request.key_type}"
    elif request.key_type == SHARE:
        try:
            await broker.share_coordinator.runtime.ensure_topic()
        except KafkaError as e:
            error, message = ErrorCode.COORDINATOR_NOT_AVAILABLE, e.message or e.code.name
    elif request.key_type == GROUP or broker.cluster is not None:
        try:
            await (broker.groups if request.key_type == GROUP else broker.transactions).ensure_topic()
        except KafkaError as e:
            error, message = ErrorCode.COORDINATOR_NOT_AVAILABLE, e.message or e.code.name
    node = broker.config.node_id
    host, port = ctx.advertised

    def where(key: str) -> tuple[int, str, int, ErrorCode, str | None]:
        """The coordinator of `key`: this broker, or in a cluster the leader of the key's partition of the
        internal topic (COORDINATOR_NOT_AVAILABLE while it has none)."""
        if error:
            return -1, "", -1, error, message
        cluster = broker.cluster
        if cluster is None:
            return node, host, port, ErrorCode.NONE, None
        if not broker.replicas.leadership_current():  # cut off from ZooKeeper: who leads may have changed
            return (
                -1,
                "",
                -1,
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "this broker's view of the cluster may be stale",
            )
        if request.key_type == SHARE:
            topic = broker.share_coordinator.runtime.topic
            leader = cluster.cache.leader_of(
                topic, broker.share_coordinator.partition_for_coordinator_key(key)
            )
        else:
            service = broker.groups if request.key_type == GROUP else broker.transactions
            topic = service.runtime.topic
            leader = cluster.cache.leader_of(topic, service.partition_for(key))
        listener = ctx.listener or broker.config.listeners[0]
        endpoint = cluster.cache.endpoint(leader, listener.name) if leader >= 0 else None
        if endpoint is None:
            return -1, "", -1, ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{topic} has no leader for {key!r} yet"
        return leader, endpoint[0], endpoint[1], ErrorCode.NONE, None

    if ctx.version >= 4:
        return FindCoordinatorResponse(
            coordinators=[
                Coordinator(key, *where(key))
                if error or _permitted(ctx, request.key_type, key)
                else Coordinator(key, -1, "", -1, _refusal(request.key_type), None)
                for key in keys
            ]
        )
    if not error and not _permitted(ctx, request.key_type, request.key):
        code = _refusal(request.key_type)
        return FindCoordinatorResponse(error_code=code, error_message=None, node_id=-1, host="", port=-1)
    node, host, port, code, text = where(request.key)
    return FindCoordinatorResponse(error_code=code, error_message=text, node_id=node, host=host, port=port)
