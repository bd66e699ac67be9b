"""OAUTHBEARER's unsecured tokens and client messages, and the SASL session around them (no sockets)."""

from __future__ import annotations

import base64
import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.errors import ErrorCode
from exactly.security.listeners import Listener, SecurityProtocol
from exactly.security.oauthbearer import (
    ClientInitialResponse,
    InvalidToken,
    OAuthBearerOptions,
    UnsecuredToken,
    client_initial_response,
    unsecured_jws,
)
from exactly.security.principal import KafkaPrincipal
from exactly.security.sasl import DEFAULT_MECHANISMS, OAUTHBEARER, SaslSession, sasl_mechanisms

NOW = 1_800_000_000_000
OPTIONS = OAuthBearerOptions()


def jws(header: object, claims: object, signature: str = "") -> str:
    def part(value: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part(header)}.{part(claims)}.{signature}"


def test_a_fresh_unsigned_token_names_its_principal() -> None:
    token = UnsecuredToken.validate(unsecured_jws("alice", NOW, 60, ("a", "b")), OPTIONS, NOW + 1000)
    assert token == UnsecuredToken("alice", NOW + 60_000, ("a", "b"))


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (jws({"alg": "none"}, {"sub": "a", "exp": NOW / 1000 - 1}), "expired"),
        (jws({"alg": "none"}, {"sub": "a"}), "No expiration time"),
        (jws({"alg": "none"}, {"sub": "a", "exp": "soon"}), "not a number"),
        (jws({"alg": "none"}, {"sub": "a", "exp": True}), "not a number"),
        (jws({"alg": "none"}, {"exp": NOW / 1000 + 60}), "No principal name in the 'sub' claim"),
        (jws({"alg": "none"}, {"sub": " ", "exp": NOW / 1000 + 60}), "No principal name"),
        (jws({"alg": "none"}, {"sub": "a", "exp": NOW / 1000 + 60, "iat": NOW / 1000 + 30}), "in the future"),
        (jws({"alg": "none"}, {"sub": "a", "exp": NOW / 1000 + 60, "iat": NOW / 1000 + 90}), "in the future"),
        (jws({"alg": "HS256"}, {"sub": "a", "exp": NOW / 1000 + 60}), "alg none"),
        (jws({"alg": "none"}, {"sub": "a", "exp": NOW / 1000 + 60}, "c2ln"), "empty signature"),
        (jws({"alg": "none"}, ["sub"]), "not a JSON object"),
        ("a.b", "3 parts"),
        ("!!.??.", "not base64url-encoded JSON"),
        (jws({"alg": "none"}, {"sub": "a", "exp": NOW / 1000 + 60, "scope": 7}), "neither a string nor"),
    ],
)
def test_a_bad_token_is_refused_with_its_reason(token: str, reason: str) -> None:
    with pytest.raises(InvalidToken, match=reason) as refused:
        UnsecuredToken.validate(token, OPTIONS, NOW)
    assert refused.value.challenge() == b'{"status":"invalid_token"}'


def test_nan_and_infinity_are_not_json() -> None:
    token = "eyJhbGciOiJub25lIn0." + base64.urlsafe_b64encode(b'{"sub":"a","exp":Infinity}').decode().rstrip(
        "="
    )
    with pytest.raises(InvalidToken, match="not base64url-encoded JSON"):
        UnsecuredToken.validate(token + ".", OPTIONS, NOW)


def test_options_come_from_the_login_modules_jaas_options() -> None:
    options = OAuthBearerOptions.from_jaas(
        {
            "unsecuredValidatorPrincipalClaimName": "client_id",
            "unsecuredValidatorScopeClaimName": "scp",
            "unsecuredValidatorRequiredScope": "read, write",
            "unsecuredValidatorAllowableClockSkewMs": "5000",
        }
    )
    assert options == OAuthBearerOptions("client_id", "scp", ("read", "write"), 5000)
    token = unsecured_jws("svc", NOW, 60, ("read",), principal_claim="client_id", scope_claim="scp")
    with pytest.raises(InvalidToken, match="scope lacks write") as refused:
        UnsecuredToken.validate(token, options, NOW)
    assert json.loads(refused.value.challenge()) == {"status": "insufficient_scope", "scope": "read write"}
    both = unsecured_jws("svc", NOW, 60, ("write", "read"), principal_claim="client_id", scope_claim="scp")
    assert UnsecuredToken.validate(both, options, NOW + 64_000).principal == "svc"  # within the 5 s skew
    with pytest.raises(ValueError, match="negative"):
        OAuthBearerOptions.from_jaas({"unsecuredValidatorAllowableClockSkewMs": "-1"})


def test_the_client_initial_response() -> None:
    assert ClientInitialResponse.parse(b"n,,\x01auth=Bearer abc.def.\x01\x01") == ClientInitialResponse(
        None, "abc.def.", {}
    )
    parsed = ClientInitialResponse.parse(b"n,a=alice,\x01auth=bearer t.u.\x01traceId=42\x01\x01")
    assert parsed == ClientInitialResponse("alice", "t.u.", {"traceId": "42"})
    assert ClientInitialResponse.parse(client_initial_response("x.y.", "bob")).authzid == "bob"
    for bad in [b"", b"n,,\x01\x01", b"y,,\x01auth=Bearer a\x01\x01", b"n,,\x01auth=Basic abc\x01\x01"]:
        with pytest.raises(InvalidToken):
            ClientInitialResponse.parse(bad)


@given(st.binary(max_size=200))
def test_any_initial_response_parses_or_raises_our_error(message: bytes) -> None:
    with contextlib.suppress(InvalidToken):
        ClientInitialResponse.parse(message)


@given(st.text(max_size=200))
def test_any_token_validates_or_raises_our_error(token: str) -> None:
    with contextlib.suppress(InvalidToken):
        UnsecuredToken.validate(token, OPTIONS, NOW)


def _session(lifetime_ms: int = 0) -> SaslSession:
    return SaslSession((OAUTHBEARER,), None, lambda user, mechanism: None, lifetime_ms, wall_ms=lambda: NOW)


def test_a_session_authenticates_the_tokens_principal() -> None:
    s = _session()
    assert s.handshake(OAUTHBEARER).error == ErrorCode.NONE
    outcome = s.authenticate(client_initial_response(unsecured_jws("alice", NOW)))
    assert (outcome.error, outcome.token) == (ErrorCode.NONE, b"")
    assert s.principal == KafkaPrincipal.user("alice")


def test_a_refused_token_is_a_challenge_then_a_failure() -> None:
    s = _session()
    s.handshake(OAUTHBEARER)
    challenge = s.authenticate(client_initial_response(unsecured_jws("alice", NOW - 7_200_000)))
    assert (challenge.error, challenge.token) == (ErrorCode.NONE, b'{"status":"invalid_token"}')
    assert not s.authenticated
    final = s.authenticate(b"\x01")
    assert final.error == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert final.message is not None
    assert "expired" in final.message
    assert s.failed


def test_the_session_ends_no_later_than_the_token_when_reauthentication_is_on() -> None:
    s = _session(lifetime_ms=3_600_000)
    s.handshake(OAUTHBEARER)
    outcome = s.authenticate(client_initial_response(unsecured_jws("alice", NOW, life_s=90)), now_ms=500.0)
    assert outcome.session_lifetime_ms == 90_000
    assert s.expires_at_ms == 90_500


def test_oauthbearer_is_enabled_only_where_named() -> None:
    listener = Listener(
        "SASL_PLAINTEXT", "127.0.0.1", 9093, SecurityProtocol.SASL_PLAINTEXT, "127.0.0.1", 9093
    )
    assert sasl_mechanisms((listener,), {})["SASL_PLAINTEXT"].mechanisms == DEFAULT_MECHANISMS
    assert OAUTHBEARER not in DEFAULT_MECHANISMS
    jaas = 'x.OAuthBearerLoginModule required unsecuredValidatorRequiredScope="kafka";'
    props = {
        "sasl.enabled.mechanisms": "OAUTHBEARER,PLAIN",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": jaas,
    }
    sasl = sasl_mechanisms((listener,), props)["SASL_PLAINTEXT"]
    assert sasl.mechanisms == (OAUTHBEARER, "PLAIN")
    assert sasl.oauthbearer.required_scope == ("kafka",)
    assert sasl.plain_users == {}
