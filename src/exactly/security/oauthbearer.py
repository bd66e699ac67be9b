"""SASL/OAUTHBEARER with unsecured JWS tokens, as Kafka's default validator checks them (development only).

Kafka's OAUTHBEARER without a configured `oauthbearer.sasl.server.callback.handler.class` accepts
*unsecured* JSON Web Tokens (`OAuthBearerUnsecuredValidatorCallbackHandler`): unsigned, so any client can
name any principal. It is for development and tests; exactly enables it only where
`sasl.enabled.mechanisms` names OAUTHBEARER, and warns at start.

Client's first message (RFC 7628 §3.1; Kafka's `OAuthBearerClientInitialResponse`):

    "n," ["a=" authzid] "," 0x01 "auth=Bearer " token 0x01 *(key "=" value 0x01) 0x01

The token is a compact JWS `base64url(header) "." base64url(claims) "."`: an empty signature, a header
JSON object with `"alg": "none"`, claims JSON object with
  - the principal claim (`unsecuredValidatorPrincipalClaimName`, default `sub`): a non-empty string;
  - `exp` (required) and `iat` (optional): seconds since the epoch (numbers); `exp` must be later than now
    less the allowed clock skew, `iat` not later than now plus it, and `exp` later than `iat`;
  - the scope claim (`unsecuredValidatorScopeClaimName`, default `scope`): a space-separated string or a
    list of strings, which must hold every `unsecuredValidatorRequiredScope` entry.
The options come from the listener's OAuthBearerLoginModule JAAS config
(`listener.name.<l>.oauthbearer.sasl.jaas.config`), with `unsecuredValidatorAllowableClockSkewMs`.

A token that fails is answered, as Kafka does, with an error challenge
`{"status":"invalid_token"}` (or `insufficient_scope` with the scope); the client then sends a lone 0x01
and the exchange fails with SASL_AUTHENTICATION_FAILED and the reason.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "ClientInitialResponse",
    "InvalidToken",
    "OAuthBearerOptions",
    "UnsecuredToken",
    "client_initial_response",
    "unsecured_jws",
]

_KVSEP = b"\x01"
_INITIAL = re.compile(rb"n,(?:a=([^,]*))?,\x01((?:[a-zA-Z]+=[\x21-\x7e \t\r\n]+\x01)*)\x01")
_BEARER = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] ([A-Za-z0-9._~+/-]*=*)")


class InvalidToken(ValueError):
    """A token (or an initial response) refused: `status` for the client's error challenge, the message
    for the SASL_AUTHENTICATION_FAILED answer and the log."""

    def __init__(self, message: str, status: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.scope = scope

    def challenge(self) -> bytes:
        body: dict[str, str] = {"status": self.status}
        if self.scope is not None:
            body["scope"] = self.scope
        return json.dumps(body, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class OAuthBearerOptions:
    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0

    @classmethod
    def from_jaas(cls, options: Mapping[str, str]) -> OAuthBearerOptions:
        """From OAuthBearerLoginModule options (ValueError for a bad clock skew)."""
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "0")
        try:
            skew_ms = int(skew)
        except ValueError:
            raise ValueError(f"unsecuredValidatorAllowableClockSkewMs {skew!r}: not an integer") from None
        if skew_ms < 0:
            raise ValueError(f"unsecuredValidatorAllowableClockSkewMs {skew_ms}: negative")
        return cls(
            options.get("unsecuredValidatorPrincipalClaimName", "sub").strip() or "sub",
            options.get("unsecuredValidatorScopeClaimName", "scope").strip() or "scope",
            tuple(x for x in re.split(r"[\s,]+", options.get("unsecuredValidatorRequiredScope", "")) if x),
            skew_ms,
        )


@dataclass(frozen=True, slots=True)
class ClientInitialResponse:
    authzid: str | None
    token: str
    extensions: Mapping[str, str]

    @classmethod
    def parse(cls, message: bytes) -> ClientInitialResponse:
        match = _INITIAL.fullmatch(message)
        if match is None:
            raise InvalidToken("Invalid OAUTHBEARER client first message")
        authzid = match.group(1).decode("utf-8", "replace") if match.group(1) else None
        pairs: dict[str, str] = {}
        for item in match.group(2).split(_KVSEP)[:-1]:
            key, _, value = item.decode("ascii", "replace").partition("=")
            pairs[key] = value
        bearer = _BEARER.fullmatch(pairs.pop("auth", ""))
        if bearer is None:
            raise InvalidToken("Invalid OAUTHBEARER client first message: no auth=Bearer token")
        return cls(authzid, bearer.group(1), pairs)


@dataclass(frozen=True, slots=True)
class UnsecuredToken:
    principal: str
    expires_at_ms: int
    scope: tuple[str, ...]

    @classmethod
    def validate(cls, token: str, options: OAuthBearerOptions, now_ms: int) -> UnsecuredToken:
        """The token's principal, expiry and scope, or InvalidToken saying what is wrong."""
        parts = token.split(".")
        if len(parts) != 3:
            raise InvalidToken(f"Unsecured JWS compact serializations must have 3 parts, not {len(parts)}")
        if parts[2]:
            raise InvalidToken("Unsecured JWS must have an empty signature (signed tokens need a validator)")
        header, claims = _json_object(parts[0], "header"), _json_object(parts[1], "claims")
        if header.get("alg") != "none":
            raise InvalidToken(f"Unsecured JWS must have alg none, not {header.get('alg')!r}")
        principal = claims.get(options.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise InvalidToken(f"No principal name in the {options.principal_claim!r} claim")
        skew = options.clock_skew_ms
        exp, iat = _seconds_ms(claims, "exp"), _seconds_ms(claims, "iat")
        if exp is None:
            raise InvalidToken("No expiration time in the 'exp' claim")
        if now_ms - skew >= exp:
            raise InvalidToken(f"The token expired at {exp} ms (now {now_ms} ms, clock skew {skew} ms)")
        if iat is not None and iat > now_ms + skew:
            raise InvalidToken(f"The token was issued in the future at {iat} ms (now {now_ms} ms)")
        if iat is not None and exp <= iat:
            raise InvalidToken(f"The token expires ({exp} ms) no later than it was issued ({iat} ms)")
        scope = _scope(claims.get(options.scope_claim))
        missing = [s for s in options.required_scope if s not in scope]
        if missing:
            raise InvalidToken(
                f"The token's scope lacks {' '.join(missing)}",
                "insufficient_scope",
                " ".join(options.required_scope),
            )
        return cls(principal, exp, scope)


def unsecured_jws(
    principal: str,
    now_ms: int,
    life_s: float = 3600,
    scope: tuple[str, ...] = (),
    principal_claim: str = "sub",
    scope_claim: str = "scope",
) -> str:
    """An unsecured JWS naming `principal`, as librdkafka's `enable.sasl.oauthbearer.unsecure.jwt` makes
    one (a client's side: exactly.client.security, and tests)."""

    def part(value: Mapping[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    claims: dict[str, object] = {
        principal_claim: principal,
        "iat": now_ms / 1000,
        "exp": (now_ms + life_s * 1000) / 1000,
    }
    if scope:
        claims[scope_claim] = list(scope)
    return f"{part({'alg': 'none'})}.{part(claims)}."


def client_initial_response(token: str, authzid: str | None = None) -> bytes:
    return f"n,{'' if authzid is None else 'a=' + authzid},\x01auth=Bearer {token}\x01\x01".encode()


def _json_object(part: str, what: str) -> dict[str, object]:
    try:
        value = json.loads(
            base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)), parse_constant=_no_constant
        )
    except (binascii.Error, ValueError):
        raise InvalidToken(f"The token's {what} is not base64url-encoded JSON") from None
    if not isinstance(value, dict):
        raise InvalidToken(f"The token's {what} is not a JSON object")
    return value


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")  # json.loads would take NaN and Infinity


def _seconds_ms(claims: Mapping[str, object], name: str) -> int | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidToken(f"The {name!r} claim is not a number")
    return int(value * 1000)


def _scope(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return tuple(value)
    raise InvalidToken("The scope claim is neither a string nor a list of strings")
