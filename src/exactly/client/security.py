"""TLS and SASL for exactly's own clients (the two-phase commit client's blocking connections, the
replica fetchers' asyncio ones), configured with the librdkafka settings the user already gives
confluent-kafka, so one `kafka.*` option set serves both (a broker builds its inter-broker one from its own
Kafka settings instead: exactly.security.inter_broker).

Settings read (names as librdkafka spells them; every other key is ignored, so a producer's whole config
may be passed):

    security.protocol                      plaintext | ssl | sasl_plaintext | sasl_ssl (any case)
    sasl.mechanism / sasl.mechanisms       PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 | OAUTHBEARER
    sasl.username, sasl.password
    enable.sasl.oauthbearer.unsecure.jwt   true: OAUTHBEARER with an unsecured JWT (the only kind here)
    sasl.oauthbearer.config                principal=<name> [scope=a,b] [lifeSeconds=3600]
    ssl.ca.location / ssl.ca.pem           the trust store (PEM file, directory, or PEM text); else the
                                           system's
    ssl.certificate.location, ssl.key.location, ssl.key.password   the client's certificate (mutual TLS)
    ssl.endpoint.identification.algorithm  https (default: the broker's name is checked) | none
    enable.ssl.certificate.verification    true (default) | false

SASL on the wire (KIP-152): SaslHandshake v1 naming the mechanism, then one SaslAuthenticate v2 per token:
PLAIN sends `NUL user NUL password` once; SCRAM (RFC 5802, `scramp`) sends client-first and
client-final and checks the server's signature in server-final; OAUTHBEARER (RFC 7628) sends its unsecured
JWT, and after an error challenge the lone 0x01 that makes the broker say why. The exchange is sans-IO
(`sasl_steps`, a generator of requests fed their responses), driven by `authenticate` on a blocking
connection and by `authenticate_async` on an asyncio one.
"""

from __future__ import annotations

import os
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

import scramp

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from exactly.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from exactly.security.listeners import SecurityProtocol
from exactly.security.oauthbearer import client_initial_response, unsecured_jws

__all__ = ["ClientSecurity", "SaslRefusedError"]

_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

Step = tuple[ApiKey, int, Any]  # a request to send: (api key, version, body)
Exchange = Callable[[ApiKey, int, Any], Any]  # (api key, version, request) -> response, on one connection
AsyncExchange = Callable[[ApiKey, int, Any], Awaitable[Any]]
SaslSteps = Generator[Step, Any, None]


class SaslRefusedError(Exception):
    """The broker refused the credentials or the mechanism (retrying cannot help)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code


def _flag(value: str | None, default: bool) -> bool:
    return default if value is None else value.strip().lower() in ("true", "1", "yes")


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    mechanism: str = "GSSAPI"  # librdkafka's default (refused with SASL)
    username: str = ""
    password: str = ""
    ca_location: str | None = None
    ca_pem: str | None = None
    certificate: str | None = None
    key: str | None = None
    key_password: str | None = None
    check_hostname: bool = True
    verify: bool = True
    oauthbearer: Mapping[str, str] | None = None  # sasl.oauthbearer.config's principal, scope, lifeSeconds
    # builds the TLS context instead of the fields above (a broker's own ssl.* settings: exactly.security.
    # inter_broker); not compared
    tls_context: Callable[[], ssl.SSLContext] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_config(cls, config: Mapping[str, object]) -> ClientSecurity:
        """From librdkafka settings (ValueError for a protocol or mechanism this client does not have)."""

        def get(name: str) -> str | None:
            value = config.get(name)
            return None if value is None else str(value)

        raw = (get("security.protocol") or "plaintext").strip().upper()
        try:
            protocol = SecurityProtocol(raw)
        except ValueError:
            raise ValueError(
                f"security.protocol {raw!r} is not one of plaintext, ssl, sasl_plaintext, sasl_ssl"
            ) from None
        mechanism = (
            (get("sasl.mechanism") or get("sasl.mechanisms") or "GSSAPI").strip().upper()
        )  # librdkafka's default
        if protocol.sasl and mechanism not in _MECHANISMS:
            raise ValueError(f"sasl.mechanism {mechanism!r} is not one of {', '.join(_MECHANISMS)}")
        oauthbearer = None
        if protocol.sasl and mechanism == "OAUTHBEARER":
            if not _flag(get("enable.sasl.oauthbearer.unsecure.jwt"), False):
                raise ValueError(
                    "sasl.mechanism OAUTHBEARER: only with enable.sasl.oauthbearer.unsecure.jwt=true"
                )
            oauthbearer = dict(
                item.partition("=")[::2]
                for item in (get("sasl.oauthbearer.config") or "").split()
                if "=" in item
            )
            if not oauthbearer.get("principal"):
                raise ValueError("sasl.oauthbearer.config: principal=<name> is required")
        return cls(
            protocol=protocol,
            mechanism=mechanism,
            username=get("sasl.username") or "",
            password=get("sasl.password") or "",
            ca_location=get("ssl.ca.location"),
            ca_pem=get("ssl.ca.pem"),
            certificate=get("ssl.certificate.location"),
            key=get("ssl.key.location"),
            key_password=get("ssl.key.password"),
            check_hostname=(get("ssl.endpoint.identification.algorithm") or "https").strip().lower()
            == "https",
            verify=_flag(get("enable.ssl.certificate.verification"), True),
            oauthbearer=oauthbearer,
        )

    def ssl_context(self) -> ssl.SSLContext:
        if self.tls_context is not None:
            return self.tls_context()
        location = None if self.ca_location in (None, "probe") else self.ca_location
        directory = location is not None and os.path.isdir(location)
        context = ssl.create_default_context(  # the system's trust store when none is named
            cafile=None if directory else location, capath=location if directory else None, cadata=self.ca_pem
        )
        if self.certificate is not None:
            context.load_cert_chain(self.certificate, self.key, self.key_password)
        context.check_hostname = self.check_hostname and self.verify
        if not self.verify:
            context.verify_mode = ssl.CERT_NONE
        return context

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        """`sock` after the TLS handshake when the protocol has TLS, else `sock` itself."""
        if not self.protocol.tls:
            return sock
        return self.ssl_context().wrap_socket(sock, server_hostname=host)

    def authenticate(self, exchange: Exchange) -> None:
        """The SASL exchange on a new connection (nothing without SASL); SaslRefusedError if refused."""
        steps = self.sasl_steps()
        try:
            step = next(steps)
            while True:
                step = steps.send(exchange(*step))
        except StopIteration:
            return

    async def authenticate_async(self, exchange: AsyncExchange) -> None:
        """`authenticate` for an asyncio connection: the same steps, each request awaited."""
        steps = self.sasl_steps()
        try:
            step = next(steps)
            while True:
                step = steps.send(await exchange(*step))
        except StopIteration:
            return

    def sasl_steps(self) -> SaslSteps:
        """The SASL exchange without I/O: a generator that yields each request to send as (api key,
        version, body) and is sent the response; it returns when authenticated (at once without SASL) and
        raises SaslRefusedError when refused. `authenticate` and `authenticate_async` drive it."""
        if not self.protocol.sasl:
            return
        handshake: SaslHandshakeResponse = yield (
            ApiKey.SASL_HANDSHAKE,
            1,
            SaslHandshakeRequest(self.mechanism),
        )
        if handshake.error_code:
            raise SaslRefusedError(
                ErrorCode(handshake.error_code),
                f"mechanism {self.mechanism} not enabled (the broker has {', '.join(handshake.mechanisms)})",
            )

        if self.mechanism == "PLAIN":
            yield from _token(f"\0{self.username}\0{self.password}".encode())
            return
        if self.oauthbearer is not None:
            options = self.oauthbearer
            jws = unsecured_jws(
                options["principal"],
                time.time_ns() // 1_000_000,
                float(options.get("lifeSeconds", "3600")),
                tuple(x for x in options.get("scope", "").split(",") if x),
            )
            if (yield from _token(client_initial_response(jws))):  # an error challenge: 0x01 makes the
                yield from _token(b"\x01")  # broker say why
                raise SaslRefusedError(ErrorCode.SASL_AUTHENTICATION_FAILED, "token refused")
            return
        scram = scramp.ScramClient([self.mechanism], self.username, self.password)
        scram.set_server_first((yield from _token(scram.get_client_first().encode())).decode())
        try:
            scram.set_server_final((yield from _token(scram.get_client_final().encode())).decode())
        except scramp.ScramException as e:
            raise SaslRefusedError(ErrorCode.SASL_AUTHENTICATION_FAILED, f"server signature: {e}") from None


def _token(data: bytes) -> Generator[Step, Any, bytes]:
    """One SaslAuthenticate v2 carrying `data`; the server's token (SaslRefusedError on an error)."""
    answer: SaslAuthenticateResponse = yield (ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(data))
    if answer.error_code:
        raise SaslRefusedError(ErrorCode(answer.error_code), answer.error_message or "refused")
    return bytes(answer.auth_bytes)
