"""ShareAcknowledge (key 79, KIP-932): a share group member acknowledges records it acquired (ACCEPT,
RELEASE, REJECT, GAP) without fetching. Session epochs as ShareFetch's, except that 0 is refused
(INVALID_SHARE_SESSION_EPOCH: there is no session to acknowledge in); -1 closes the session after the
acknowledgements, releasing what the member still holds. Each partition's ErrorCode is its
acknowledgements' outcome; nothing is answered before the changed share state is persisted.
"""

from __future__ import annotations

import uuid

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import SHARE_DISABLED_MESSAGE, handler
from exactly.broker.guard import allowed
from exactly.broker.shares import acknowledge_partitions
from exactly.errors import ErrorCode
from exactly.group.share.session import CLOSE_EPOCH, OPEN_EPOCH
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.share_acknowledge import (
    LeaderIdAndEpoch,
    PartitionData,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
)


@handler(ApiKey.SHARE_ACKNOWLEDGE)
async def handle(ctx: RequestContext, request: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
    broker = ctx.broker
    if not broker.config.group_share_enable:
        return ShareAcknowledgeResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION, error_message=SHARE_DISABLED_MESSAGE
        )
    shares = broker.shares
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    if not allowed(ctx, ApiKey.SHARE_ACKNOWLEDGE, "group", group_id):
        return ShareAcknowledgeResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    epoch = request.share_session_epoch
    if epoch == OPEN_EPOCH:
        return ShareAcknowledgeResponse(error_code=ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    code, session = shares.sessions.continue_(group_id, member_id, epoch)
    if session is None:
        return ShareAcknowledgeResponse(error_code=code)
    acks = {
        (t.topic_id, p.partition_index): [
            (b.first_offset, b.last_offset, b.acknowledge_types) for b in p.acknowledgement_batches
        ]
        for t in request.topics
        for p in t.partitions
    }
    codes = await acknowledge_partitions(ctx, ApiKey.SHARE_ACKNOWLEDGE, group_id, member_id, acks)
    if epoch == CLOSE_EPOCH:
        shares.release_session(session)
        shares.sessions.close(session)
    by_topic: dict[uuid.UUID, list[PartitionData]] = {}
    for (topic_id, index), error in sorted(codes.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        by_topic.setdefault(topic_id, []).append(
            PartitionData(index, error, current_leader=LeaderIdAndEpoch(-1, -1))
        )
    return ShareAcknowledgeResponse(
        responses=[ShareAcknowledgeTopicResponse(t, ps) for t, ps in by_topic.items()]
    )
