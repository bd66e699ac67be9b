"""DeleteShareGroupOffsets (key 92, KIP-932): forget a share group's state for whole topics, as Kafka's
`kafka-share-groups.sh --delete-offsets`: every share partition of the topic loses its SPSO and in-flight
window (a tombstone in `__share_group_state`); the group's next fetch starts from
`share.auto.offset.reset`. Served only with group.share.enable=true.

Kafka's rules (KafkaApis.handleDeleteShareGroupOffsetsRequest, GroupCoordinatorShard
.initiateDeleteShareGroupOffsets): GROUP DELETE (else the whole request GROUP_AUTHORIZATION_FAILED);
per topic TOPIC READ (else TOPIC_AUTHORIZATION_FAILED); then the group must be a share group
(GROUP_ID_NOT_FOUND) with no members (NON_EMPTY_GROUP), both for the whole request; a topic that does
not exist, or of which the group has no state, is UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import SHARE_DISABLED_MESSAGE, handler
from exactly.broker.shares import offsets_alterable
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol import primitives as p
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
)

API = ApiKey.DELETE_SHARE_GROUP_OFFSETS
NO_STATE = "There is no offset information to delete."


@handler(API)
async def handle(
    ctx: RequestContext, request: DeleteShareGroupOffsetsRequest
) -> DeleteShareGroupOffsetsResponse:
    if not ctx.broker.config.group_share_enable:
        return DeleteShareGroupOffsetsResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION, error_message=SHARE_DISABLED_MESSAGE
        )
    group_id = request.group_id
    if not authz.allowed(ctx, API, "group", group_id):
        return DeleteShareGroupOffsetsResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    denied = {t.topic_name for t in request.topics if not authz.allowed(ctx, API, "topic", t.topic_name)}
    try:
        code = await offsets_alterable(ctx, group_id)
    except KafkaError as e:
        return DeleteShareGroupOffsetsResponse(error_code=e.code, error_message=e.message)
    if code != ErrorCode.NONE:
        message = (
            f"Share group {group_id} is not empty."
            if code == ErrorCode.NON_EMPTY_GROUP
            else f"Group {group_id} is not a share group."
        )
        return DeleteShareGroupOffsetsResponse(error_code=code, error_message=message)
    shares = ctx.broker.shares
    held = shares.group_keys(group_id)
    responses: list[DeleteShareGroupOffsetsResponseTopic] = []
    for wanted in request.topics:
        name = wanted.topic_name
        info = ctx.broker.metadata.topics.get(name)
        if name in denied:
            responses.append(
                DeleteShareGroupOffsetsResponseTopic(
                    name, p.UUID_ZERO, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
                )
            )
            continue
        keys = [k for k in held if info is not None and k.topic_id == info.topic_id]
        if info is None or not keys:
            responses.append(
                DeleteShareGroupOffsetsResponseTopic(
                    name,
                    p.UUID_ZERO if info is None else info.topic_id,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    NO_STATE if info is not None else "This server does not host this topic-partition.",
                )
            )
            continue
        topic = DeleteShareGroupOffsetsResponseTopic(name, info.topic_id)
        try:
            for key in keys:
                await shares.delete(key)
        except KafkaError as e:
            topic.error_code, topic.error_message = e.code, e.message
        responses.append(topic)
    return DeleteShareGroupOffsetsResponse(responses=responses)
