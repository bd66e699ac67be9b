"""The SASL state machine (exactly.security.sasl), sans-IO: Kafka's messages and codes, and a Hypothesis
state machine whose random event sequences never reach AUTHENTICATED without a valid proof."""

from __future__ import annotations

import pytest
import scramp
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from exactly.cluster.metadata import ScramCredential
from exactly.errors import ErrorCode
from exactly.security.oauthbearer import client_initial_response, unsecured_jws
from exactly.security.principal import KafkaPrincipal
from exactly.security.sasl import (
    OAUTHBEARER,
    SUPPORTED_MECHANISMS,
    TRANSITIONS,
    Derivation,
    IllegalSaslStateError,
    SaslEvent,
    SaslSession,
    SaslState,
    make_scram_credential,
    parse_jaas_users,
)

PASSWORD = "right-password"
CREDENTIALS = {
    ("alice", mechanism): make_scram_credential(
        mechanism, PASSWORD, 4096, salt=b"fixed-salt-" + mechanism.encode()
    )
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
}


RIGHT_DERIVED = Derivation(
    "SCRAM-SHA-256",
    PASSWORD,
    CREDENTIALS["alice", "SCRAM-SHA-256"].salt,
    CREDENTIALS["alice", "SCRAM-SHA-256"].iterations,
).run()


def lookup(user: str, mechanism: str) -> ScramCredential | None:
    return CREDENTIALS.get((user, mechanism))


def session(plain_users: dict[str, str] | None = None) -> SaslSession:
    return SaslSession(SUPPORTED_MECHANISMS, plain_users, lookup)


def scram_exchange(s: SaslSession, mechanism: str, user: str, password: str) -> ErrorCode:
    client = scramp.ScramClient([mechanism], user, password)
    assert s.handshake(mechanism).error == ErrorCode.NONE
    first = s.authenticate(client.get_client_first().encode())
    if first.error != ErrorCode.NONE:
        return first.error
    client.set_server_first(first.token.decode())
    final = s.authenticate(client.get_client_final().encode())
    if final.error == ErrorCode.NONE:
        client.set_server_final(final.token.decode())  # the server proved it knows the credential too
    return final.error


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_authenticates_and_names_the_principal(mechanism: str) -> None:
    s = session()
    assert scram_exchange(s, mechanism, "alice", PASSWORD) == ErrorCode.NONE
    assert s.state is SaslState.AUTHENTICATED
    assert s.principal == KafkaPrincipal.user("alice")


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("bob", PASSWORD)])
def test_scram_refuses(user: str, password: str) -> None:
    s = session()
    assert scram_exchange(s, "SCRAM-SHA-256", user, password) == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert s.failed
    assert s.principal is None


def test_plain_uses_scram_credentials_without_jaas_users() -> None:
    ok = session()
    ok.handshake("PLAIN")
    assert ok.authenticate(f"\0alice\0{PASSWORD}".encode()).error == ErrorCode.NONE
    assert ok.principal == KafkaPrincipal.user("alice")
    bad = session()
    bad.handshake("PLAIN")
    outcome = bad.authenticate(b"\0alice\0wrong")
    assert (outcome.error, outcome.message) == (
        ErrorCode.SASL_AUTHENTICATION_FAILED,
        "Authentication failed: Invalid username or password",
    )
    assert "wrong" not in outcome.failure


def test_plain_against_scram_hands_out_its_pbkdf2_and_checks_what_comes_back() -> None:
    s = session()
    s.handshake("PLAIN")
    token = f"\0alice\0{PASSWORD}".encode()
    work = s.start_authenticate(token)
    assert work == Derivation("SCRAM-SHA-256", PASSWORD, *_salt_iterations("SCRAM-SHA-256"))
    with pytest.raises(IllegalSaslStateError):  # nothing else while the password is being checked
        s.start_authenticate(token)
    assert s.failed
    s = session()
    s.handshake("PLAIN")
    assert s.start_authenticate(token) is not None
    assert s.authenticate(token, 0.0, work.run()).error == ErrorCode.NONE
    assert s.principal == KafkaPrincipal.user("alice")
    # a result made for another password is not taken for this token's: derived again, refused
    wrong = session()
    wrong.handshake("PLAIN")
    assert wrong.start_authenticate(b"\0alice\0guess") is not None
    assert (
        wrong.authenticate(b"\0alice\0guess", 0.0, RIGHT_DERIVED).error
        == ErrorCode.SASL_AUTHENTICATION_FAILED
    )
    for blocked in ("api_versions", "handshake"):
        s = session()
        s.handshake("PLAIN")
        assert s.start_authenticate(token) is not None
        with pytest.raises(IllegalSaslStateError):
            getattr(s, blocked)(*(("PLAIN",) if blocked == "handshake" else ()))


def _salt_iterations(mechanism: str) -> tuple[bytes, int]:
    stored = CREDENTIALS["alice", mechanism]
    return stored.salt, stored.iterations


def test_nothing_slow_to_hand_out() -> None:
    """SCRAM's server side uses the stored keys; JAAS users, unknown users and bad tokens need no PBKDF2."""
    s = session()
    s.handshake("SCRAM-SHA-256")
    first = scramp.ScramClient(["SCRAM-SHA-256"], "alice", PASSWORD).get_client_first().encode()
    assert s.start_authenticate(first) is None
    for plain_users, token in (({"carol": "c"}, b"\0carol\0c"), (None, b"\0bob\0pw"), (None, b"x")):
        s = session(plain_users)
        s.handshake("PLAIN")
        assert s.start_authenticate(token) is None


def test_plain_with_jaas_users_ignores_scram_credentials() -> None:
    s = session({"carol": "c-pw"})
    s.handshake("PLAIN")
    assert s.authenticate(f"\0alice\0{PASSWORD}".encode()).error == ErrorCode.SASL_AUTHENTICATION_FAILED
    s = session({"carol": "c-pw"})
    s.handshake("PLAIN")
    assert s.authenticate(b"carol\0carol\0c-pw").error == ErrorCode.NONE


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"only-one-part", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
        (b"\0\0pw", "Authentication failed: username not specified"),
        (b"\0alice\0", "Authentication failed: password not specified"),
        (
            b"mallory\0alice\0" + PASSWORD.encode(),
            "Authentication failed: Client requested an authorization id",
        ),
    ],
)
def test_plain_messages_are_kafkas(token: bytes, message: str) -> None:
    s = session()
    s.handshake("PLAIN")
    outcome = s.authenticate(token)
    assert outcome.error == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert outcome.message is not None
    assert outcome.message.startswith(message)


def test_unknown_mechanism_and_illegal_order() -> None:
    s = session()
    outcome = s.handshake("GSSAPI")
    assert outcome.error == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert s.failed
    s = session()
    with pytest.raises(IllegalSaslStateError, match="ILLEGAL_SASL_STATE"):
        s.authenticate(b"x")
    s = session()
    s.handshake("PLAIN")
    with pytest.raises(IllegalSaslStateError):
        s.handshake("PLAIN")
    with pytest.raises(IllegalSaslStateError):
        session().other_request("METADATA v12")


def test_jaas_users() -> None:
    jaas = 'x.PlainLoginModule required username="a" password="p" user_a="p" user_b="q\\"r";'
    assert parse_jaas_users(jaas) == {"a": "p", "b": 'q"r'}
    assert parse_jaas_users(None) == {}


def test_every_transition_ends_in_a_known_state() -> None:
    into_authenticated = [
        event for (_, event), target in TRANSITIONS.items() if target is SaslState.AUTHENTICATED
    ]
    assert [event.name for event in into_authenticated] == ["PROOF_ACCEPTED"]
    assert all(state is not SaslState.FAILED for state, _ in TRANSITIONS)  # terminal
    assert {event for state, event in TRANSITIONS if state is SaslState.AUTHENTICATED} == {
        SaslEvent.HANDSHAKE,
        SaslEvent.BAD_MECHANISM,
    }  # only re-authentication leaves AUTHENTICATED


def test_reauthentication_keeps_mechanism_and_principal() -> None:
    users = {"carol": "c-pw", "dan": "d-pw"}
    s = SaslSession(SUPPORTED_MECHANISMS, users, lookup, lifetime_ms=1000)
    s.handshake("PLAIN")
    first = s.authenticate(b"\0carol\0c-pw", now_ms=5000)
    assert first.session_lifetime_ms == 1000
    assert s.expires_at_ms == 6000
    assert not s.expired(5999)
    assert s.expired(6000)
    assert s.intercepts(17, 5500)  # SaslHandshake: re-authentication
    assert not s.intercepts(3, 5500)  # Metadata within the lifetime goes to its handler
    assert s.intercepts(3, 6000)
    assert s.handshake("PLAIN").error == ErrorCode.NONE
    assert s.authenticate(b"\0carol\0c-pw", now_ms=5900).error == ErrorCode.NONE
    assert (s.principal, s.expires_at_ms, s.reauthentications) == (KafkaPrincipal.user("carol"), 6900, 1)
    s.handshake("PLAIN")
    changed = s.authenticate(b"\0dan\0d-pw", now_ms=6000)
    assert changed.error == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert changed.message == "Cannot change principals during re-authentication from User:carol: User:dan"
    assert s.failed
    other = SaslSession(SUPPORTED_MECHANISMS, users, lookup, lifetime_ms=1000)
    other.handshake("PLAIN")
    other.authenticate(b"\0carol\0c-pw")
    assert other.handshake("SCRAM-SHA-256").error == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert other.failed
    off = session()
    off.handshake("PLAIN")
    off.authenticate(f"\0alice\0{PASSWORD}".encode())
    assert not off.intercepts(17, 10**12)
    with pytest.raises(IllegalSaslStateError):
        off.handshake("PLAIN")


class SaslMachine(RuleBasedStateMachine):
    """Random interleavings of every request a client can send; a SCRAM client with the right or a wrong
    password, PLAIN tokens right or wrong, OAUTHBEARER tokens good or bad, garbage. Invariant:
    AUTHENTICATED only right after a complete exchange that used the right password (or a good token),
    and only as that user."""

    def __init__(self) -> None:
        super().__init__()
        self.s = session()
        self.client: scramp.ScramClient | None = None
        self.client_password = ""
        self.client_stage = 0
        self.proved = False  # the last completed exchange used the right password for alice
        self.oauth_challenged = False  # OAUTHBEARER refused a token: only its 0x01 may follow

    def _call(self, fn: object, *args: object) -> object:
        try:
            return fn(*args)  # type: ignore[operator]
        except IllegalSaslStateError:
            assert self.s.failed
            return None

    # A failed session's connection is closed: the only thing left is a new connection.
    @precondition(lambda self: self.s.failed or self.s.authenticated)
    @rule()
    def reconnect(self) -> None:
        self.s = session()
        self.client = None
        self.oauth_challenged = False
        self.proved = False

    @precondition(lambda self: not self.s.failed)
    @rule()
    def api_versions(self) -> None:
        self._call(self.s.api_versions)

    @precondition(lambda self: not self.s.failed)
    @rule(name=st.sampled_from([*SUPPORTED_MECHANISMS * 4, "GSSAPI", "DIGEST-MD5", "scram-sha-256", ""]))
    def handshake(self, name: str) -> None:
        self._call(self.s.handshake, name)
        self.client = None
        self.oauth_challenged = False

    @precondition(lambda self: not self.s.failed)
    @rule()
    def other_request(self) -> None:
        self._call(self.s.other_request, "METADATA v12")

    @precondition(lambda self: self.s.state is SaslState.HANDSHAKE_OR_VERSIONS)
    @rule()
    def authenticate_too_early(self) -> None:
        self._call(self.s.authenticate, b"\0alice\0" + PASSWORD.encode())

    @precondition(lambda self: self.s.state is SaslState.AUTHENTICATE)
    @rule(token=st.binary(max_size=64))
    def garbage(self, token: bytes) -> None:
        self._call(self.s.authenticate, token)
        self.proved = False

    @precondition(lambda self: self.s.state is SaslState.AUTHENTICATE)
    @rule(
        valid=st.booleans(),
        user=st.sampled_from(["alice", "bob", ""]),
        right=st.booleans(),
        authzid=st.sampled_from(["", "alice", "x"]),
        derivation=st.sampled_from(["inline", "derived", "stale"]),
    )
    def plain_token(self, valid: bool, user: str, right: bool, authzid: str, derivation: str) -> None:
        if valid:
            user, right, authzid = "alice", True, ""
        password = PASSWORD if right else "guess"
        was_plain = self.s.mechanism == "PLAIN" and self.s.state is SaslState.AUTHENTICATE
        token = f"{authzid}\0{user}\0{password}".encode()
        if derivation == "inline":  # no start_authenticate: the session derives it itself
            self._call(self.s.authenticate, token)
        else:  # as the broker does: the derivation run elsewhere, or (stale) one for the right password
            work = self._call(self.s.start_authenticate, token)
            if not self.s.failed:
                derived = RIGHT_DERIVED if derivation == "stale" else work.run() if work else None  # type: ignore[attr-defined]
                self._call(self.s.authenticate, token, 0.0, derived)
        self.proved = was_plain and right and user == "alice" and authzid in ("", "alice")

    @precondition(lambda self: self.s.state is SaslState.AUTHENTICATE)
    @rule(right=st.booleans(), user=st.sampled_from(["alice", "alice", "bob"]))
    def scram_first(self, right: bool, user: str) -> None:
        mechanism = (
            self.s.mechanism if self.s.mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512") else "SCRAM-SHA-256"
        )
        self.client_password = PASSWORD if right and user == "alice" else "guess"
        self.client = scramp.ScramClient([mechanism], user, self.client_password)
        outcome = self._call(self.s.authenticate, self.client.get_client_first().encode())
        self.client_stage = 0
        if outcome is not None and outcome.error == ErrorCode.NONE and outcome.token:  # type: ignore[attr-defined]
            try:
                self.client.set_server_first(outcome.token.decode())  # type: ignore[attr-defined]
                self.client_stage = 1
            except scramp.ScramException:
                pass
        self.proved = False

    @precondition(
        lambda self: (
            self.s.state is SaslState.AUTHENTICATE and self.client is not None and self.client_stage == 1
        )
    )
    @rule()
    def scram_final(self) -> None:
        assert self.client is not None
        was_authenticating = self.s.state is SaslState.AUTHENTICATE
        self._call(self.s.authenticate, self.client.get_client_final().encode())
        self.proved = was_authenticating and self.client_password == PASSWORD
        self.client = None

    @precondition(lambda self: self.s.state is SaslState.AUTHENTICATE)
    @rule(kind=st.sampled_from(["valid", "expired", "no-sub", "signed", "authzid"]))
    def oauthbearer_token(self, kind: str) -> None:
        """An unsecured JWS (the session's clock reads 0): only a fresh, unsigned token naming alice, sent
        first in an OAUTHBEARER exchange, proves anything."""
        fresh = self.s.mechanism == OAUTHBEARER and not self.oauth_challenged
        claim = "client_id" if kind == "no-sub" else "sub"
        jws = unsecured_jws("alice", -7_200_000 if kind == "expired" else 0, principal_claim=claim)
        token = client_initial_response(
            jws + ("c2ln" if kind == "signed" else ""), "x" if kind == "authzid" else None
        )
        outcome = self._call(self.s.authenticate, token)
        if outcome is not None and outcome.token and not outcome.error:  # type: ignore[attr-defined]
            self.oauth_challenged = True
        self.proved = fresh and kind == "valid"

    @precondition(lambda self: self.s.state is SaslState.AUTHENTICATE)
    @rule()
    def oauthbearer_after_the_challenge(self) -> None:
        self._call(self.s.authenticate, b"\x01")
        self.proved = False

    @invariant()
    def authenticated_only_with_a_proof(self) -> None:
        if self.s.state is SaslState.AUTHENTICATED:
            assert self.proved
            assert self.s.principal == KafkaPrincipal.user("alice")
        else:
            assert self.s.principal is None


SaslMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=30, deadline=None)
test_sasl_state_machine = SaslMachine.TestCase
