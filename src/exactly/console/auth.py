"""Who may see the console: HTTP basic authentication checked against the broker's SCRAM credentials.

The console is off unless `console.enable=true`. When the broker has security on — a SASL listener or an
authorizer (`authorizer.class.name`) — every console request must carry `Authorization: Basic
base64(user:password)` for a user with a SCRAM credential (SCRAM-SHA-256 or SCRAM-SHA-512, as
kafka-configs / AlterUserScramCredentials made it), and with an authorizer the user must also be allowed
DESCRIBE on the CLUSTER resource (a super user always is): the console shows every topic, group and
transaction, which is what an operator's Describe-all sees. Without either, the console is as open as the
broker's own listener (and the broker's PLAINTEXT warning applies to it too).

The password is checked as SCRAM's server does, without storing it (RFC 5802 §3):

    SaltedPassword = PBKDF2-HMAC-H(password, salt, iterations)
    StoredKey      = H(HMAC-H(SaltedPassword, "Client Key"))       must equal the stored StoredKey

PBKDF2 costs milliseconds (4096+ iterations), and the page polls every few seconds: a success is
remembered (by a hash of user, password and the credential's StoredKey, so a changed or deleted
credential is checked again) for `cache_ms`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from exactly.cluster.metadata import ScramCredential

__all__ = ["AuthResult", "ConsoleAuth", "parse_basic", "scram_password_matches"]

_MECHANISMS = (("SCRAM-SHA-512", "sha512"), ("SCRAM-SHA-256", "sha256"))

CredentialLookup = Callable[[str, str], ScramCredential | None]  # (user, mechanism) -> credential
Authorize = Callable[[str], bool]  # user -> may see the console (the authorizer's DESCRIBE on CLUSTER)


class AuthResult(Enum):
    ALLOWED = "allowed"
    UNAUTHENTICATED = "unauthenticated"  # 401 with a WWW-Authenticate challenge
    FORBIDDEN = "forbidden"  # 403: authenticated, not authorized


def parse_basic(header: str | None) -> tuple[str, str] | None:
    """(user, password) of an `Authorization: Basic ...` header value; None if absent or malformed."""
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    if not sep or not user:
        return None
    return user, password


def scram_password_matches(credential: ScramCredential, password: str, hash_name: str) -> bool:
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), credential.salt, credential.iterations)
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    stored_key = hashlib.new(hash_name, client_key).digest()
    return hmac.compare_digest(stored_key, credential.stored_key)


@dataclass(frozen=True, slots=True)
class _Remembered:
    until_ms: int


class ConsoleAuth:
    """Decides each request. `required` False: everything is allowed (security off)."""

    def __init__(
        self,
        required: bool,
        lookup: CredentialLookup,
        authorize: Authorize | None = None,
        cache_ms: int = 300_000,
    ) -> None:
        self.required = required
        self._lookup = lookup
        self._authorize = authorize
        self._cache_ms = cache_ms
        self._remembered: dict[bytes, _Remembered] = {}

    def check(self, authorization: str | None, now_ms: int) -> tuple[AuthResult, str | None]:
        """The decision and the authenticated user (None when security is off or nobody is named)."""
        if not self.required:
            return AuthResult.ALLOWED, None
        found = parse_basic(authorization)
        if found is None:
            return AuthResult.UNAUTHENTICATED, None
        user, password = found
        if not self._authenticated(user, password, now_ms):
            return AuthResult.UNAUTHENTICATED, user
        if self._authorize is not None and not self._authorize(user):
            return AuthResult.FORBIDDEN, user
        return AuthResult.ALLOWED, user

    def _authenticated(self, user: str, password: str, now_ms: int) -> bool:
        for mechanism, hash_name in _MECHANISMS:
            credential = self._lookup(user, mechanism)
            if credential is None:
                continue
            key = hashlib.sha256(
                b"\0".join([user.encode(), password.encode(), mechanism.encode(), credential.stored_key])
            ).digest()
            remembered = self._remembered.get(key)
            if remembered is not None and remembered.until_ms > now_ms:
                return True
            if scram_password_matches(credential, password, hash_name):
                if len(self._remembered) > 1000:
                    self._remembered.clear()
                self._remembered[key] = _Remembered(now_ms + self._cache_ms)
                return True
        return False
