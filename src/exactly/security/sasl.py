"""SASL on a SASL_PLAINTEXT / SASL_SSL connection, sans-IO: Kafka's SaslServerAuthenticator.

Wire (KIP-152): the client sends `SaslHandshake(mechanism)`, then one `SaslAuthenticate(auth_bytes)` per
token of the mechanism; each answer carries the server's token. Only ApiVersions and SaslHandshake may come
before SaslHandshake; anything else before authentication has completed closes the connection (Kafka's
ILLEGAL_SASL_STATE). The pre-KIP-152 raw-token framing (SaslHandshake v0 followed by bare tokens) is not
built: SaslHandshake v0 closes the connection (it stays advertised: librdkafka needs v0 in the range to
enable SASL at all, then sends v1, as every maintained client does).

Transitions (`TRANSITIONS`; a (state, event) pair not in it is illegal and fails the session):

    HANDSHAKE_OR_VERSIONS --API_VERSIONS--------> HANDSHAKE_OR_VERSIONS
    HANDSHAKE_OR_VERSIONS --HANDSHAKE------------> AUTHENTICATE
    HANDSHAKE_OR_VERSIONS --BAD_MECHANISM--------> FAILED     (UNSUPPORTED_SASL_MECHANISM, then closed)
    AUTHENTICATE          --TOKEN----------------> AUTHENTICATE   (SCRAM's first message)
    AUTHENTICATE          --PROOF_ACCEPTED-------> AUTHENTICATED
    AUTHENTICATE          --PROOF_REFUSED--------> FAILED     (SASL_AUTHENTICATION_FAILED, then closed)
    AUTHENTICATED         --HANDSHAKE------------> AUTHENTICATE   (re-authentication, KIP-368)
    AUTHENTICATED         --BAD_MECHANISM--------> FAILED

Re-authentication (KIP-368) when `connections.max.reauth.ms` > 0: SaslAuthenticate answers carry
`session_lifetime_ms`; the client authenticates again on the same connection (same mechanism, same
principal) before it ends; any other request on an expired session closes the connection. With 0 (the
default) an authenticated connection answers SaslHandshake with ILLEGAL_SASL_STATE and never expires.

Mechanisms:

* PLAIN (RFC 4616: `authzid NUL authcid NUL password`). Users come from the listener's
  `listener.name.<l>.plain.sasl.jaas.config` (or `sasl.jaas.config`) `user_<name>="<password>"` entries, as
  Kafka's PlainLoginModule. When no such users are configured, PLAIN checks the password against the
  user's stored SCRAM credential instead (SCRAM-SHA-256, else SCRAM-SHA-512): `exactly users add` then
  serves both, and no password is ever written in a config file. That check salts and hashes the password
  (PBKDF2, 4096+ iterations: milliseconds of CPU), so it is a separate pure step: `start_authenticate`
  returns it as a `Derivation` for the caller to run off its event loop (exactly.broker runs it in a
  thread), and `authenticate` takes its result. Until then any other request fails the session.
* SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802/7677, `scramp`): credentials from the cluster metadata log.
* OAUTHBEARER (RFC 7628) with unsecured JWS tokens, as Kafka's default validator (exactly.security.
  oauthbearer): for development only, so enabled only where `sasl.enabled.mechanisms` names it. A refused
  token is answered with an error challenge first (TOKEN), the client's lone 0x01 then fails the session.
  With re-authentication on, the session ends no later than the token expires (KIP-368).

Every failure is SASL_AUTHENTICATION_FAILED with Kafka's messages; `failure` (for the log) names the
mechanism and the user, never a secret.
"""

from __future__ import annotations

import hmac
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

import scramp
import scramp.core

from exactly.cluster.metadata import ScramCredential
from exactly.errors import ErrorCode
from exactly.security.listeners import Listener
from exactly.security.oauthbearer import (
    ClientInitialResponse,
    InvalidToken,
    OAuthBearerOptions,
    UnsecuredToken,
)
from exactly.security.principal import KafkaPrincipal

__all__ = [
    "DEFAULT_MECHANISMS",
    "OAUTHBEARER",
    "PLAIN",
    "SCRAM_MECHANISMS",
    "SUPPORTED_MECHANISMS",
    "TRANSITIONS",
    "AuthOutcome",
    "Derivation",
    "ListenerSasl",
    "SaslEvent",
    "SaslSession",
    "SaslState",
    "ScramLookup",
    "jaas_options",
    "make_scram_credential",
    "parse_jaas_users",
    "sasl_mechanisms",
]

PLAIN = "PLAIN"
OAUTHBEARER = "OAUTHBEARER"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)  # sasl.enabled.mechanisms when not set
SUPPORTED_MECHANISMS = (*DEFAULT_MECHANISMS, OAUTHBEARER)


class SaslState(Enum):
    HANDSHAKE_OR_VERSIONS = "waiting for SaslHandshake"
    AUTHENTICATE = "authenticating"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


class SaslEvent(Enum):
    API_VERSIONS = "ApiVersions"
    HANDSHAKE = "SaslHandshake with an enabled mechanism"
    BAD_MECHANISM = "SaslHandshake with a mechanism not enabled"
    TOKEN = "SaslAuthenticate, exchange not finished"
    PROOF_ACCEPTED = "SaslAuthenticate, credentials proved"
    PROOF_REFUSED = "SaslAuthenticate, credentials refused or token malformed"


_S, _E = SaslState, SaslEvent
TRANSITIONS: dict[tuple[SaslState, SaslEvent], SaslState] = {
    (_S.HANDSHAKE_OR_VERSIONS, _E.API_VERSIONS): _S.HANDSHAKE_OR_VERSIONS,
    (_S.HANDSHAKE_OR_VERSIONS, _E.HANDSHAKE): _S.AUTHENTICATE,
    (_S.HANDSHAKE_OR_VERSIONS, _E.BAD_MECHANISM): _S.FAILED,
    (_S.AUTHENTICATE, _E.TOKEN): _S.AUTHENTICATE,
    (_S.AUTHENTICATE, _E.PROOF_ACCEPTED): _S.AUTHENTICATED,
    (_S.AUTHENTICATE, _E.PROOF_REFUSED): _S.FAILED,
    (_S.AUTHENTICATED, _E.HANDSHAKE): _S.AUTHENTICATE,
    (_S.AUTHENTICATED, _E.BAD_MECHANISM): _S.FAILED,
}

_SASL_HANDSHAKE = 17  # ApiKey.SASL_HANDSHAKE

ScramLookup = Callable[[str, str], ScramCredential | None]  # (user, mechanism) -> its credential


@dataclass(frozen=True, slots=True)
class Derivation:
    """A password salted and hashed as a stored SCRAM credential was (pure CPU work, no I/O): `run` it
    anywhere, then hand the result to `SaslSession.authenticate`."""

    mechanism: str
    password: str = field(repr=False)
    salt: bytes
    iterations: int

    def run(self) -> Derived:
        return Derived(self, make_scram_credential(self.mechanism, self.password, self.iterations, self.salt))


@dataclass(frozen=True, slots=True)
class Derived:
    """A Derivation's result: the credential the password makes."""

    derivation: Derivation
    credential: ScramCredential


@dataclass(frozen=True, slots=True)
class AuthOutcome:
    """The answer to one SaslHandshake or SaslAuthenticate."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None  # for the client
    token: bytes = b""  # the server's next token
    failure: str = ""  # for the log (no secrets): set when the session failed
    session_lifetime_ms: int = 0  # KIP-368: re-authenticate within this (0: never)


class IllegalSaslStateError(Exception):
    """A request the SASL state does not allow: Kafka closes the connection."""


class _Failed(Exception):
    def __init__(self, message: str, log: str) -> None:
        super().__init__(message)
        self.message = message
        self.log = log


class _Mechanism(Protocol):
    user: str | None  # known once the exchange has named one
    expires_at_ms: int | None  # wall-clock end of the credential proved (OAUTHBEARER's token), if any

    def slow_part(self, token: bytes) -> Derivation | None:
        """The slow pure work checking `token` needs (None: none, or a malformed token step refuses)."""
        ...

    def step(self, token: bytes, derived: Derived | None) -> tuple[bytes, bool]:
        """The server's answer and whether the exchange is complete; raises _Failed."""
        ...


class _Plain:
    def __init__(self, users: Mapping[str, str] | None, lookup: ScramLookup) -> None:
        self.user: str | None = None
        self.expires_at_ms: int | None = None
        self._users = users
        self._lookup = lookup

    def slow_part(self, token: bytes) -> Derivation | None:
        parts = token.split(b"\0")
        if self._users or len(parts) != 3 or not parts[1] or not parts[2]:
            return None
        try:
            user, password = parts[1].decode(), parts[2].decode()
        except UnicodeDecodeError:
            return None
        stored = self._stored(user)
        return (
            None if stored is None else Derivation(stored[0], password, stored[1].salt, stored[1].iterations)
        )

    def _stored(self, user: str) -> tuple[str, ScramCredential] | None:
        for mechanism in SCRAM_MECHANISMS:
            stored = self._lookup(user, mechanism)
            if stored is not None:
                return mechanism, stored
        return None

    def step(self, token: bytes, derived: Derived | None) -> tuple[bytes, bool]:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise _Failed(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}", "malformed PLAIN token"
            )
        try:
            authzid, user, password = (part.decode() for part in parts)
        except UnicodeDecodeError:
            raise _Failed("Invalid SASL/PLAIN response: not UTF-8", "malformed PLAIN token") from None
        if not user:
            raise _Failed("Authentication failed: username not specified", "no user name")
        self.user = user
        if not password:
            raise _Failed("Authentication failed: password not specified", "no password")
        if not self._valid(user, password, derived):
            raise _Failed("Authentication failed: Invalid username or password", "invalid credentials")
        if authzid and authzid != user:
            raise _Failed(
                "Authentication failed: Client requested an authorization id that is different from username",
                f"authorization id {authzid!r} differs",
            )
        return b"", True

    def _valid(self, user: str, password: str, derived: Derived | None) -> bool:
        if self._users:
            expected = self._users.get(user)
            return expected is not None and hmac.compare_digest(expected.encode(), password.encode())
        found = self._stored(user)
        if found is None:
            return False
        mechanism, stored = found
        wanted = Derivation(mechanism, password, stored.salt, stored.iterations)
        # the derivation made for this very password and credential; else (none given, or the credential
        # changed meanwhile) derived here
        mine = (
            derived.credential
            if derived is not None and derived.derivation == wanted
            else wanted.run().credential
        )
        return hmac.compare_digest(mine.stored_key, stored.stored_key)


class _Scram:
    def __init__(self, mechanism: str, lookup: ScramLookup) -> None:
        self.user: str | None = None
        self.expires_at_ms: int | None = None
        self._name = mechanism
        self._lookup = lookup
        self._server_nonce = secrets.token_hex(24)
        self._server = scramp.ScramMechanism(mechanism).make_server(
            self._auth_info, s_nonce=self._server_nonce
        )
        self._first = True

    def _auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int] | None:
        self.user = user
        found = self._lookup(user, self._name)
        return None if found is None else (found.salt, found.stored_key, found.server_key, found.iterations)

    def slow_part(self, token: bytes) -> Derivation | None:
        return None  # the server side of SCRAM uses the stored keys: HMACs only

    def step(self, token: bytes, derived: Derived | None) -> tuple[bytes, bool]:
        try:
            text = token.decode()
            if self._first:
                self._first = False
                self._server.set_client_first(text)
                return self._server.get_server_first().encode(), False
            self._accept_kafka_nonce(text)
            self._server.set_client_final(text)
            return self._server.get_server_final().encode(), True
        except (UnicodeDecodeError, scramp.ScramException) as e:
            reason = "unknown user" if "Unknown user" in str(e) else one_line(str(e))
            raise _Failed(
                f"Authentication failed during authentication due to invalid credentials with SASL "
                f"mechanism {self._name}",
                reason if isinstance(e, scramp.ScramException) else "token not UTF-8",
            ) from None

    def _accept_kafka_nonce(self, client_final: str) -> None:
        """Kafka's ScramSaslServer checks only that the final nonce ends with the server's own part, and
        older librdkafka (kcat) repeats its client nonce in front: accept what Kafka accepts. The proof is
        still checked over the messages as sent."""
        sent = next((x[2:] for x in client_final.split(",") if x.startswith("r=")), None)
        if sent is not None and sent != str(self._server.nonce) and sent.endswith(self._server_nonce):
            self._server.nonce = scramp.core.Nonce(sent)


class _OAuthBearer:
    def __init__(self, options: OAuthBearerOptions, wall_ms: Callable[[], int]) -> None:
        self.user: str | None = None
        self.expires_at_ms: int | None = None
        self._options = options
        self._wall_ms = wall_ms
        self._refused: InvalidToken | None = None  # the error challenge sent, the client's 0x01 awaited

    def slow_part(self, token: bytes) -> Derivation | None:
        return None

    def step(self, token: bytes, derived: Derived | None) -> tuple[bytes, bool]:
        if self._refused is not None:
            reason = str(self._refused)
            if token != b"\x01":
                reason = "Invalid OAUTHBEARER client final message (expected 0x01 after the error)"
            raise _Failed(f"Authentication failed: {reason}", reason)
        try:
            initial = ClientInitialResponse.parse(token)
        except InvalidToken as e:
            raise _Failed(f"Authentication failed: {e}", str(e)) from None
        try:
            jws = UnsecuredToken.validate(initial.token, self._options, self._wall_ms())
        except InvalidToken as e:
            self._refused = e
            return e.challenge(), False
        self.user = jws.principal
        if initial.authzid is not None and initial.authzid != jws.principal:
            raise _Failed(
                f"Authentication failed: Client requested an authorization id ({initial.authzid}) that is "
                f"different from the token's principal name ({jws.principal})",
                f"authorization id {initial.authzid!r} differs",
            )
        self.expires_at_ms = jws.expires_at_ms
        return b"", True


@dataclass(frozen=True, slots=True)
class ListenerSasl:
    """One SASL listener's settings: its enabled mechanisms, PLAIN's JAAS users, OAUTHBEARER's options."""

    mechanisms: tuple[str, ...] = DEFAULT_MECHANISMS
    plain_users: Mapping[str, str] = field(default_factory=dict)
    oauthbearer: OAuthBearerOptions = field(default_factory=OAuthBearerOptions)


class SaslSession:
    """One connection's SASL state. The connection asks `intercepts` for each request; those it intercepts
    are answered with `handshake` / `authenticate`, or close the connection (`other_request`, `expire`)."""

    def __init__(
        self,
        mechanisms: tuple[str, ...],
        plain_users: Mapping[str, str] | None,
        lookup: ScramLookup,
        lifetime_ms: int = 0,
        oauthbearer: OAuthBearerOptions | None = None,
        wall_ms: Callable[[], int] = lambda: 0,
    ) -> None:
        """`wall_ms`: the wall clock in ms since the epoch (OAUTHBEARER token times)."""
        self.mechanisms = mechanisms
        self._oauthbearer = oauthbearer or OAuthBearerOptions()
        self._wall_ms = wall_ms
        self.lifetime_ms = lifetime_ms  # connections.max.reauth.ms
        self.state = SaslState.HANDSHAKE_OR_VERSIONS
        self.mechanism: str | None = None
        self.expires_at_ms: float | None = None
        self.reauthentications = 0
        self._previous: KafkaPrincipal | None = None  # during re-authentication: who it was
        self._principal: KafkaPrincipal | None = None
        self._plain_users = plain_users
        self._lookup = lookup
        self._exchange: _Mechanism | None = None
        self._deriving = False  # a Derivation handed out, its result not yet back

    @property
    def principal(self) -> KafkaPrincipal | None:
        """Who proved their identity: only while AUTHENTICATED (a later illegal request fails the session)."""
        return self._principal if self.state is SaslState.AUTHENTICATED else None

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.AUTHENTICATED

    @property
    def failed(self) -> bool:
        return self.state is SaslState.FAILED

    def expired(self, now_ms: float) -> bool:
        return self.expires_at_ms is not None and now_ms >= self.expires_at_ms

    def intercepts(self, api_key: int, now_ms: float) -> bool:
        """Whether the connection must hand this request to the session rather than to its handler: every
        request before authentication, SaslHandshake when re-authentication is on, anything once the
        session has expired."""
        if self.state is not SaslState.AUTHENTICATED:
            return True
        return (api_key == _SASL_HANDSHAKE and self.lifetime_ms > 0) or self.expired(now_ms)

    def expire(self, name: str) -> None:
        """A request other than SaslHandshake after the session expired: Kafka closes the connection."""
        self.state = SaslState.FAILED
        raise IllegalSaslStateError(f"{name} after the session expired (connections.max.reauth.ms)")

    def _move(self, event: SaslEvent) -> None:
        next_state = TRANSITIONS.get((self.state, event))
        if next_state is None:
            state, self.state = self.state, SaslState.FAILED
            raise IllegalSaslStateError(f"ILLEGAL_SASL_STATE: {event.value} while {state.value}")
        self.state = next_state

    def other_request(self, name: str) -> None:
        """A request other than ApiVersions / SaslHandshake / SaslAuthenticate before authentication."""
        state = self.state
        self.state = SaslState.FAILED
        raise IllegalSaslStateError(f"ILLEGAL_SASL_STATE: {name} while {state.value}")

    def api_versions(self) -> None:
        if self._deriving:
            self.other_request("ApiVersions while a password is being checked")
        if self.state is not SaslState.AUTHENTICATED:
            self._move(SaslEvent.API_VERSIONS)

    def handshake(self, mechanism: str) -> AuthOutcome:
        if self._deriving:
            self.other_request("SaslHandshake while a password is being checked")
        reauthenticating = self.state is SaslState.AUTHENTICATED
        if reauthenticating and self.lifetime_ms <= 0:
            self.other_request("SaslHandshake (re-authentication is off)")
        if reauthenticating and mechanism != self.mechanism:
            self._move(SaslEvent.BAD_MECHANISM)
            return AuthOutcome(
                ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                f"SASL mechanism '{mechanism}' requested by client is not supported for re-authentication "
                f"of mechanism '{self.mechanism}'",
                failure=f"re-authentication with mechanism {mechanism!r} instead of {self.mechanism!r}",
            )
        if mechanism not in self.mechanisms:
            self._move(SaslEvent.BAD_MECHANISM)
            return AuthOutcome(
                ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                f"Unsupported SASL mechanism {mechanism}",
                failure=f"unsupported mechanism {mechanism!r} (enabled: {', '.join(self.mechanisms)})",
            )
        self._previous = self._principal if reauthenticating else None
        self._move(SaslEvent.HANDSHAKE)
        self.mechanism = mechanism
        if mechanism == PLAIN:
            self._exchange = _Plain(self._plain_users, self._lookup)
        elif mechanism == OAUTHBEARER:
            self._exchange = _OAuthBearer(self._oauthbearer, self._wall_ms)
        else:
            self._exchange = _Scram(mechanism, self._lookup)
        return AuthOutcome()

    def start_authenticate(self, token: bytes) -> Derivation | None:
        """The slow pure work (PBKDF2) checking `token` needs, for the caller to run off its event loop and
        pass to `authenticate`; None when there is none (then call `authenticate` at once)."""
        exchange = self._exchange
        if self._deriving or self.state is not SaslState.AUTHENTICATE or exchange is None:
            self.other_request("SaslAuthenticate")
        assert exchange is not None
        work = exchange.slow_part(token)
        self._deriving = work is not None
        return work

    def authenticate(self, token: bytes, now_ms: float = 0.0, derived: Derived | None = None) -> AuthOutcome:
        """Check `token` (with `derived`, the result of `start_authenticate`'s Derivation, if it gave one;
        without it the work is done here)."""
        self._deriving = False
        exchange = self._exchange
        if self.state is not SaslState.AUTHENTICATE or exchange is None:
            self.other_request("SaslAuthenticate")
        assert exchange is not None
        try:
            answer, done = exchange.step(token, derived)
        except _Failed as e:
            self._move(SaslEvent.PROOF_REFUSED)
            user = "no user" if exchange.user is None else f"user {exchange.user!r}"
            return AuthOutcome(
                ErrorCode.SASL_AUTHENTICATION_FAILED, e.message, failure=f"{self.mechanism}, {user}: {e.log}"
            )
        if not done:
            self._move(SaslEvent.TOKEN)
            return AuthOutcome(token=answer)
        assert exchange.user is not None
        principal = KafkaPrincipal.user(exchange.user)
        if self._previous is not None and principal != self._previous:
            self._move(SaslEvent.PROOF_REFUSED)
            return AuthOutcome(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                f"Cannot change principals during re-authentication from {self._previous}: {principal}",
                failure=f"re-authentication as {principal} instead of {self._previous}",
            )
        self._move(SaslEvent.PROOF_ACCEPTED)
        if self._previous is not None:
            self.reauthentications += 1
        self._principal = principal
        self._previous = None
        lifetime_ms = self.lifetime_ms
        if lifetime_ms > 0 and exchange.expires_at_ms is not None:  # KIP-368: no longer than the token
            lifetime_ms = max(1, min(lifetime_ms, exchange.expires_at_ms - self._wall_ms()))
        if lifetime_ms > 0:
            self.expires_at_ms = now_ms + lifetime_ms
        return AuthOutcome(token=answer, session_lifetime_ms=lifetime_ms)


def make_scram_credential(
    mechanism: str, password: str, iterations: int, salt: bytes | None = None
) -> ScramCredential:
    """Salt and hash `password` for `mechanism` (raises scramp.ScramException for iterations < 4096)."""
    salt_out, stored_key, server_key, i = scramp.ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=iterations, salt=salt
    )
    return ScramCredential(salt_out, i, stored_key, server_key)


_JAAS_OPTION = re.compile(r'\b([A-Za-z_][\w.]*)\s*=\s*"((?:[^"\\]|\\.)*)"')


def jaas_options(jaas: str | None) -> dict[str, str]:
    """The `name="value"` options of a JAAS config's login module (empty when none)."""
    if not jaas:
        return {}
    return {m.group(1): m.group(2).replace('\\"', '"') for m in _JAAS_OPTION.finditer(jaas)}


def parse_jaas_users(jaas: str | None) -> dict[str, str]:
    """`user_<name>="<password>"` options of a PlainLoginModule JAAS config (empty when none)."""
    return {k[5:]: v for k, v in jaas_options(jaas).items() if k.startswith("user_") and len(k) > 5}


def one_line(text: str) -> str:
    return " ".join(text.split())


def sasl_mechanisms(listeners: tuple[Listener, ...], props: Mapping[str, str]) -> dict[str, ListenerSasl]:
    """Per SASL listener: its enabled mechanisms, PLAIN users and OAUTHBEARER options (ValueError for a
    mechanism exactly does not have). `listener.name.<l>.` forms win over the broker-wide names, and
    `listener.name.<l>.<mechanism>.sasl.jaas.config` over `listener.name.<l>.sasl.jaas.config`, as in
    Kafka."""
    out: dict[str, ListenerSasl] = {}
    for listener in listeners:
        if not listener.protocol.sasl:
            continue
        prefix = f"listener.name.{listener.name.lower()}."
        raw = props.get(prefix + "sasl.enabled.mechanisms", props.get("sasl.enabled.mechanisms"))
        names = DEFAULT_MECHANISMS if raw is None else tuple(x.strip() for x in raw.split(",") if x.strip())
        unknown = [x for x in names if x not in SUPPORTED_MECHANISMS]
        if unknown or not names:
            raise ValueError(
                f"listener {listener.name}: sasl.enabled.mechanisms {', '.join(unknown) or '(empty)'}: "
                f"exactly supports {', '.join(SUPPORTED_MECHANISMS)}"
            )

        def jaas(mechanism: str, prefix: str = prefix) -> str | None:
            for key in (
                f"{prefix}{mechanism}.sasl.jaas.config",
                f"{prefix}sasl.jaas.config",
                "sasl.jaas.config",
            ):
                if key in props:
                    return props[key]
            return None

        try:
            oauthbearer = OAuthBearerOptions.from_jaas(jaas_options(jaas("oauthbearer")))
        except ValueError as e:
            raise ValueError(f"listener {listener.name}: OAUTHBEARER: {e}") from None
        out[listener.name] = ListenerSasl(names, parse_jaas_users(jaas("plain")), oauthbearer)
    return out
