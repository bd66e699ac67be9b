"""SaslHandshake (key 17) and SaslAuthenticate (key 36) outside authentication.

On a SASL listener the connection answers both itself until the client has authenticated
(exactly.broker.connection `_sasl_gate`, exactly.security.sasl). They reach these handlers only on a
listener without SASL or on an authenticated connection without re-authentication
(connections.max.reauth.ms = 0), where Kafka answers ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from exactly.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse


@handler(ApiKey.SASL_HANDSHAKE)
async def handshake(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(ErrorCode.ILLEGAL_SASL_STATE, [])


@handler(ApiKey.SASL_AUTHENTICATE)
async def authenticate(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    message = "SaslAuthenticate request received after successful authentication"
    if ctx.listener is not None and not ctx.listener.protocol.sasl:
        message = f"listener {ctx.listener.name} does not use SASL"
    return SaslAuthenticateResponse(ErrorCode.ILLEGAL_SASL_STATE, message, b"", 0)
