"""AlterShareGroupOffsets (key 91, KIP-932): set share partitions' start offsets (SPSO), as Kafka's
`kafka-share-groups.sh --reset-offsets --execute`. Each named partition starts again from its new start
offset with an empty in-flight window (delivery counts forgotten), written to `__share_group_state` under
a new state epoch. Served only with group.share.enable=true.

Kafka's rules (KafkaApis.handleAlterShareGroupOffsetsRequest, GroupCoordinatorShard.alterShareGroupOffsets):
GROUP READ (else the whole request GROUP_AUTHORIZATION_FAILED); per topic TOPIC READ (else
TOPIC_AUTHORIZATION_FAILED for its partitions) and an existing topic (UNKNOWN_TOPIC_OR_PARTITION); then,
at the coordinator, the group must be a share group (GROUP_ID_NOT_FOUND) with no members
(NON_EMPTY_GROUP), both answered for the whole request; a partition beyond the topic's count is
UNKNOWN_TOPIC_OR_PARTITION. A negative start offset is INVALID_REQUEST for its partition (exactly's
check: the admin client resolves earliest/latest/datetime to offsets before sending).
"""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import SHARE_DISABLED_MESSAGE, handler
from exactly.broker.shares import offsets_alterable
from exactly.errors import ErrorCode, KafkaError
from exactly.group.share.records import SharePartitionKey
from exactly.protocol import primitives as p
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)

API = ApiKey.ALTER_SHARE_GROUP_OFFSETS


@handler(API)
async def handle(
    ctx: RequestContext, request: AlterShareGroupOffsetsRequest
) -> AlterShareGroupOffsetsResponse:
    if not ctx.broker.config.group_share_enable:
        return AlterShareGroupOffsetsResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION, error_message=SHARE_DISABLED_MESSAGE
        )
    group_id = request.group_id
    if not authz.allowed(ctx, API, "group", group_id):
        return AlterShareGroupOffsetsResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    try:
        code = await offsets_alterable(ctx, group_id)
    except KafkaError as e:
        return AlterShareGroupOffsetsResponse(error_code=e.code, error_message=e.message)
    if code != ErrorCode.NONE:
        return AlterShareGroupOffsetsResponse(error_code=code, error_message=_message(code, group_id))
    shares = ctx.broker.shares
    responses: list[AlterShareGroupOffsetsResponseTopic] = []
    for wanted in request.topics:
        info = ctx.broker.metadata.topics.get(wanted.topic_name)
        topic = AlterShareGroupOffsetsResponseTopic(wanted.topic_name, p.UUID_ZERO)
        if not authz.allowed(ctx, API, "topic", wanted.topic_name):
            error: ErrorCode | None = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif info is None:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            error = None
            topic.topic_id = info.topic_id
        for asked in wanted.partitions:
            index = asked.partition_index
            code = error or ErrorCode.NONE
            if info is not None and error is None:
                if not 0 <= index < info.partitions:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif asked.start_offset < 0:
                    code = ErrorCode.INVALID_REQUEST
                else:
                    try:
                        await shares.alter(
                            SharePartitionKey(group_id, info.topic_id, index), asked.start_offset
                        )
                    except KafkaError as e:
                        code = e.code
            topic.partitions.append(
                AlterShareGroupOffsetsResponsePartition(
                    index, code, None if code == ErrorCode.NONE else code.name
                )
            )
        responses.append(topic)
    return AlterShareGroupOffsetsResponse(responses=responses)


def _message(code: ErrorCode, group_id: str) -> str:
    if code == ErrorCode.NON_EMPTY_GROUP:
        return f"Share group {group_id} is not empty: its offsets can only be altered without members."
    return f"Group {group_id} is not a share group."
