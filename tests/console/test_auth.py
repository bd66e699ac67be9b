"""The console's HTTP basic authentication against SCRAM credentials (RFC 5802's StoredKey check)."""

from __future__ import annotations

import base64

import pytest

from exactly.cluster.metadata import ScramCredential
from exactly.console.auth import AuthResult, ConsoleAuth, parse_basic, scram_password_matches
from exactly.security.sasl import make_scram_credential


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


CREDENTIALS = {
    ("alice", "SCRAM-SHA-256"): make_scram_credential("SCRAM-SHA-256", "alice-secret", 4096),
    ("bob", "SCRAM-SHA-512"): make_scram_credential("SCRAM-SHA-512", "bob:secret", 4096),
}


def _lookup(user: str, mechanism: str) -> ScramCredential | None:
    return CREDENTIALS.get((user, mechanism))


@pytest.mark.parametrize(
    ("mechanism", "hash_name"), [("SCRAM-SHA-256", "sha256"), ("SCRAM-SHA-512", "sha512")]
)
def test_the_stored_key_check_matches_scram(mechanism: str, hash_name: str) -> None:
    credential = make_scram_credential(mechanism, "pw", 4096)
    assert scram_password_matches(credential, "pw", hash_name)
    assert not scram_password_matches(credential, "pw2", hash_name)


def test_parse_basic() -> None:
    assert parse_basic(_basic("u", "p:q")) == ("u", "p:q")
    assert parse_basic(None) is None
    assert parse_basic("Bearer abc") is None
    assert parse_basic("Basic !!!") is None
    assert parse_basic("Basic " + base64.b64encode(b"nocolon").decode()) is None
    assert parse_basic("Basic " + base64.b64encode(b":p").decode()) is None


def test_off_allows_everyone() -> None:
    auth = ConsoleAuth(False, _lookup)
    assert auth.check(None, 0) == (AuthResult.ALLOWED, None)


def test_on_needs_a_scram_user_with_the_right_password() -> None:
    auth = ConsoleAuth(True, _lookup)
    assert auth.check(None, 0)[0] is AuthResult.UNAUTHENTICATED
    assert auth.check(_basic("alice", "wrong"), 0) == (AuthResult.UNAUTHENTICATED, "alice")
    assert auth.check(_basic("mallory", "x"), 0)[0] is AuthResult.UNAUTHENTICATED
    assert auth.check(_basic("alice", "alice-secret"), 0) == (AuthResult.ALLOWED, "alice")
    assert auth.check(_basic("bob", "bob:secret"), 0) == (AuthResult.ALLOWED, "bob")


def test_a_changed_credential_is_checked_again() -> None:
    stored = dict(CREDENTIALS)
    auth = ConsoleAuth(True, lambda u, m: stored.get((u, m)))
    assert auth.check(_basic("alice", "alice-secret"), 0)[0] is AuthResult.ALLOWED
    stored[("alice", "SCRAM-SHA-256")] = make_scram_credential("SCRAM-SHA-256", "new", 4096)
    assert auth.check(_basic("alice", "alice-secret"), 1)[0] is AuthResult.UNAUTHENTICATED
    del stored[("alice", "SCRAM-SHA-256")]
    assert auth.check(_basic("alice", "new"), 2)[0] is AuthResult.UNAUTHENTICATED


def test_the_authorizer_decides_after_authentication() -> None:
    auth = ConsoleAuth(True, _lookup, authorize=lambda user: user == "bob")
    assert auth.check(_basic("alice", "alice-secret"), 0) == (AuthResult.FORBIDDEN, "alice")
    assert auth.check(_basic("bob", "bob:secret"), 0) == (AuthResult.ALLOWED, "bob")
