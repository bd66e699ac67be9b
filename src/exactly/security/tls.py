"""TLS listeners: one `ssl.SSLContext` per SSL or SASL_SSL listener, from Kafka's `ssl.*` settings.

Each setting is looked up as `listener.name.<listener, lower case>.<name>` first, then `<name>`, then
Kafka's default (as Kafka's `ListenerName.configPrefix`). On a SASL_SSL listener `ssl.client.auth` is read
only with the listener prefix (KIP-684: the broker-wide value applies to SSL listeners).

Key store (the broker's key and certificate chain), PEM only (`ssl.keystore.type=PEM`; Kafka's default
JKS and PKCS12 are refused with one line):

    ssl.keystore.location=/etc/exactly/broker.pem       a PEM file: the private key and the chain
    ssl.keystore.certificate.chain=-----BEGIN ...       or both inline (a properties value may put the
    ssl.keystore.key=-----BEGIN ...                     PEM on one line: the base64 body is re-wrapped)
    ssl.key.password=...                                when the private key is encrypted

Trust store (the CAs client certificates are checked against; without one, the system's CAs):
`ssl.truststore.type=PEM` with `ssl.truststore.location` (a PEM file of certificates) or
`ssl.truststore.certificates` (inline PEM).

`ssl.enabled.protocols` (TLSv1.2, TLSv1.3) bounds the versions, capped by `ssl.protocol` (TLSv1.2 = no
TLS 1.3, as in Java). `ssl.cipher.suites` takes IANA names (Kafka's, e.g.
TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384) or OpenSSL names and narrows the TLS 1.2 suites; Python's `ssl`
cannot narrow TLS 1.3 suites (OpenSSL's defaults apply), so a list of TLS 1.3 suites only means TLS 1.3
only. `ssl.client.auth`: `required` (a client without a certificate the trust store vouches for fails the
handshake), `requested` (a certificate is asked for, and checked when given; without one the client is
ANONYMOUS), `none`. The principal of a client with a certificate: `exactly.security.ssl_principal`.

Reload without restart: when the modification time or size of `ssl.keystore.location` or
`ssl.truststore.location` changes, the next connection (checked at most once a second) gets a context built
from the new files; connections already open keep theirs. Files that do not load keep the old context
(one WARNING line).
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from exactly.configs.broker import BROKER_CONFIGS
from exactly.errors import KafkaError
from exactly.security.listeners import Listener, SecurityProtocol
from exactly.security.principal import ANONYMOUS, KafkaPrincipal
from exactly.security.ssl_principal import SslPrincipalMapper

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S = 10.0  # a client that has not finished its TLS handshake by then is dropped
RELOAD_CHECK_S = 1.0  # how often the key and trust store files are looked at for a change

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_TLS13_SUITES = frozenset(
    {
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_AES_128_CCM_SHA256",
        "TLS_AES_128_CCM_8_SHA256",
    }
)
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


class TlsConfigError(ValueError):
    """An `ssl.*` setting, key store or trust store the broker cannot use (one readable line)."""


class ClientAuth(Enum):
    REQUIRED = "required"
    REQUESTED = "requested"
    NONE = "none"

    @property
    def verify_mode(self) -> ssl.VerifyMode:
        return {
            ClientAuth.REQUIRED: ssl.CERT_REQUIRED,
            ClientAuth.REQUESTED: ssl.CERT_OPTIONAL,
            ClientAuth.NONE: ssl.CERT_NONE,
        }[self]


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """The `ssl.*` settings of one listener, resolved (listener prefix, global, Kafka's default)."""

    listener: str
    keystore_type: str
    keystore_location: str | None
    keystore_certificate_chain: str | None = field(repr=False)
    keystore_key: str | None = field(repr=False)
    key_password: str | None = field(repr=False)
    truststore_type: str
    truststore_location: str | None
    truststore_certificates: str | None = field(repr=False)
    enabled_protocols: tuple[str, ...]
    protocol: str
    cipher_suites: tuple[str, ...]
    client_auth: ClientAuth
    mapper: SslPrincipalMapper

    @classmethod
    def for_listener(cls, listener: Listener, props: Mapping[str, str]) -> TlsSettings:
        prefix = f"listener.name.{listener.name.lower()}."

        def get(name: str, *, prefixed_only: bool = False) -> str | None:
            for key in (prefix + name,) if prefixed_only else (prefix + name, name):
                if key in props:
                    return props[key]
            return BROKER_CONFIGS[name].default

        def parsed(name: str, **kw: bool) -> object:
            raw = get(name, **kw)
            try:
                return BROKER_CONFIGS[name].parse(raw) if raw is not None else None
            except KafkaError as e:
                raise TlsConfigError(f"listener {listener.name}: {e.message}") from None

        client_auth_prefixed = listener.protocol is SecurityProtocol.SASL_SSL
        try:
            mapper = SslPrincipalMapper.parse(get("ssl.principal.mapping.rules"))
        except ValueError as e:
            raise TlsConfigError(f"listener {listener.name}: ssl.principal.mapping.rules: {e}") from None
        enabled = parsed("ssl.enabled.protocols")
        ciphers = parsed("ssl.cipher.suites")
        assert isinstance(enabled, tuple)
        assert isinstance(ciphers, tuple)
        return cls(
            listener=listener.name,
            keystore_type=str(get("ssl.keystore.type")).strip().upper(),
            keystore_location=_blank_none(get("ssl.keystore.location")),
            keystore_certificate_chain=_blank_none(get("ssl.keystore.certificate.chain")),
            keystore_key=_blank_none(get("ssl.keystore.key")),
            key_password=get("ssl.key.password"),
            truststore_type=str(get("ssl.truststore.type")).strip().upper(),
            truststore_location=_blank_none(get("ssl.truststore.location")),
            truststore_certificates=_blank_none(get("ssl.truststore.certificates")),
            enabled_protocols=enabled,
            protocol=str(parsed("ssl.protocol")),
            cipher_suites=ciphers,
            client_auth=ClientAuth(str(parsed("ssl.client.auth", prefixed_only=client_auth_prefixed))),
            mapper=mapper,
        )

    def watched_files(self) -> tuple[str, ...]:
        return tuple(p for p in (self.keystore_location, self.truststore_location) if p)


def _blank_none(value: str | None) -> str | None:
    return value if value is not None and value.strip() else None


def normalise_pem(text: str) -> str:
    """PEM blocks as OpenSSL reads them, whatever the line breaks of a properties value (`\\n` escapes, one
    line, or wrapped): each block's base64 body re-wrapped at 64 columns. Headers inside a block (the
    legacy `Proc-Type: 4,ENCRYPTED` form) are kept."""
    text = text.replace("\\n", "\n")
    blocks = []
    for kind, body in _PEM_BLOCK.findall(text):
        lines = body.strip().splitlines()
        headers = [line.strip() for line in lines if ":" in line]
        data = "".join("".join(line.split()) for line in lines if ":" not in line)
        wrapped = "\n".join(data[i : i + 64] for i in range(0, len(data), 64))
        head = "\n".join(headers) + "\n\n" if headers else ""
        blocks.append(f"-----BEGIN {kind}-----\n{head}{wrapped}\n-----END {kind}-----\n")
    return "".join(blocks)


def _read(path: str, what: str, listener: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise TlsConfigError(f"listener {listener}: cannot read {what} {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise TlsConfigError(f"listener {listener}: {what} {path} is not a PEM file") from None


def _load_key_store(ctx: ssl.SSLContext, s: TlsSettings) -> None:
    name = s.listener
    if s.keystore_location is None and (s.keystore_certificate_chain is None or s.keystore_key is None):
        raise TlsConfigError(
            f"listener {name} needs a key store: ssl.keystore.location, or "
            "ssl.keystore.certificate.chain and ssl.keystore.key"
        )
    if s.keystore_type != "PEM":
        raise TlsConfigError(
            f"listener {name}: ssl.keystore.type {s.keystore_type} is not supported: exactly reads PEM key "
            "stores only (set ssl.keystore.type=PEM)"
        )
    if s.keystore_location is not None:
        where = s.keystore_location
        pem = _read(where, "ssl.keystore.location", name)
    else:
        where = "ssl.keystore.key"
        pem = normalise_pem(s.keystore_key or "") + normalise_pem(s.keystore_certificate_chain or "")
    if "PRIVATE KEY-----" not in pem:
        raise TlsConfigError(f"listener {name}: no PEM private key in {where}")
    if "CERTIFICATE-----" not in pem:
        raise TlsConfigError(f"listener {name}: no PEM certificate in {where}")
    encrypted = "ENCRYPTED PRIVATE KEY-----" in pem or "Proc-Type: 4,ENCRYPTED" in pem
    if encrypted and s.key_password is None:
        raise TlsConfigError(
            f"listener {name}: the private key in {where} is encrypted: set ssl.key.password"
        )
    # load_cert_chain reads files only: a private temporary file for the inline form. A password is always
    # passed ("" when none is set) so that OpenSSL never prompts on the terminal.
    with tempfile.TemporaryDirectory(prefix="exactly-tls-") as tmp:
        path = where
        if s.keystore_location is None:
            path = os.path.join(tmp, "keystore.pem")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(pem)
        try:
            ctx.load_cert_chain(path, password=s.key_password or "")
        except ssl.SSLError as e:
            if encrypted:
                raise TlsConfigError(
                    f"listener {name}: ssl.key.password does not decrypt the private key in {where}"
                ) from None
            raise TlsConfigError(
                f"listener {name}: {where} is not a usable PEM private key with its certificate chain "
                f"({e.reason or e})"
            ) from None


def _load_trust_store(ctx: ssl.SSLContext, s: TlsSettings) -> None:
    name = s.listener
    if s.truststore_location is None and s.truststore_certificates is None:
        if s.client_auth is not ClientAuth.NONE:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)  # Kafka: the JVM's default trust store
        return
    if s.truststore_type != "PEM":
        raise TlsConfigError(
            f"listener {name}: ssl.truststore.type {s.truststore_type} is not supported: exactly reads PEM "
            "trust stores only (set ssl.truststore.type=PEM)"
        )
    if s.truststore_location is not None:
        where = s.truststore_location
        pem = normalise_pem(_read(where, "ssl.truststore.location", name))
    else:
        where = "ssl.truststore.certificates"
        pem = normalise_pem(s.truststore_certificates or "")
    if "CERTIFICATE-----" not in pem:
        raise TlsConfigError(f"listener {name}: no PEM certificate in {where}")
    try:
        ctx.load_verify_locations(cadata=pem)
    except (ssl.SSLError, ValueError) as e:
        raise TlsConfigError(f"listener {name}: {where} has a certificate that does not load ({e})") from None


_KEX = {"ECDHE_RSA": "ECDHE-RSA-", "ECDHE_ECDSA": "ECDHE-ECDSA-", "DHE_RSA": "DHE-RSA-", "RSA": ""}


def openssl_cipher_name(name: str) -> str:
    """An IANA (Java) TLS 1.2 suite name as OpenSSL spells it; an OpenSSL name unchanged."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kex, _, cipher = name.removeprefix("TLS_").partition("_WITH_")
    prefix = _KEX.get(kex)
    if prefix is None:
        return name
    cipher = (
        cipher.replace("CHACHA20_POLY1305_SHA256", "CHACHA20_POLY1305")
        .replace("AES_128", "AES128")
        .replace("AES_256", "AES256")
        .replace("_CBC", "")
    )
    return prefix + cipher.replace("_", "-")


def _set_ciphers(ctx: ssl.SSLContext, s: TlsSettings) -> None:
    tls12 = [c for c in s.cipher_suites if c not in _TLS13_SUITES]
    if not s.cipher_suites:
        return
    if not tls12:  # only TLS 1.3 suites: Java would have no suite for TLS 1.2
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        return
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    probe.set_ciphers("ALL:@SECLEVEL=0")
    known = {c["name"] for c in probe.get_ciphers()}
    names = [openssl_cipher_name(c) for c in tls12]
    unknown = [c for c, n in zip(tls12, names, strict=True) if n not in known]
    if unknown:
        raise TlsConfigError(f"listener {s.listener}: unknown ssl.cipher.suites: {', '.join(unknown)}")
    ctx.set_ciphers(":".join(names))


class _DirectSSLObject(ssl.SSLObject):
    """An SSLObject whose `read` and `pending` are the C methods themselves. uvloop's TLS layer calls both
    once per TLS record (about 2 KB from librdkafka), and the Python wrappers of `ssl.SSLObject` cost about
    a quarter of the broker's TLS overhead. (`SSLContext.sslobject_class` is the documented hook.)"""

    @classmethod
    def _create(cls, *args: Any, **kwargs: Any) -> _DirectSSLObject:
        obj: _DirectSSLObject = super()._create(*args, **kwargs)  # type: ignore[misc]
        inner = getattr(obj, "_sslobj", None)
        if inner is not None:
            obj.read = inner.read  # type: ignore[method-assign]
            obj.pending = inner.pending  # type: ignore[method-assign]
        return obj


def build_context(s: TlsSettings) -> ssl.SSLContext:
    """The server-side SSLContext of one listener (TlsConfigError with one line when it cannot be built)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.sslobject_class = _DirectSSLObject
    enabled = sorted(_VERSIONS[p] for p in s.enabled_protocols)
    if not enabled:
        raise TlsConfigError(f"listener {s.listener}: ssl.enabled.protocols is empty")
    highest = min(enabled[-1], ssl.TLSVersion.TLSv1_2 if s.protocol == "TLSv1.2" else enabled[-1])
    if highest < enabled[0]:
        raise TlsConfigError(
            f"listener {s.listener}: ssl.protocol {s.protocol} allows none of ssl.enabled.protocols"
        )
    ctx.minimum_version, ctx.maximum_version = enabled[0], highest
    _set_ciphers(ctx, s)
    _load_key_store(ctx, s)
    ctx.verify_mode = s.client_auth.verify_mode
    _load_trust_store(ctx, s)
    return ctx


def build_client_context(s: TlsSettings, check_hostname: bool = True) -> ssl.SSLContext:
    """The client-side SSLContext a broker connects to its peers with (exactly.security.inter_broker): the
    same protocol bounds and suites as its listener, its trust store (else the system's CAs) to check the
    peer, and its key store, when it has one, as its client certificate. TlsConfigError as above."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    enabled = sorted(_VERSIONS[p] for p in s.enabled_protocols)
    if not enabled:
        raise TlsConfigError(f"listener {s.listener}: ssl.enabled.protocols is empty")
    ctx.minimum_version = enabled[0]
    ctx.maximum_version = min(enabled[-1], ssl.TLSVersion.TLSv1_2 if s.protocol == "TLSv1.2" else enabled[-1])
    _set_ciphers(ctx, s)
    if s.keystore_location is not None or s.keystore_certificate_chain is not None:
        _load_key_store(ctx, s)
    if s.truststore_location is None and s.truststore_certificates is None:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        _load_trust_store(ctx, s)
    ctx.check_hostname = check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _stamp(paths: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    out = []
    for path in paths:
        try:
            st = os.stat(path)
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((-1, -1))
    return tuple(out)


class TlsListener:
    """The TLS side of one listener: its current context (rebuilt when its files change) and the principal
    of a client."""

    def __init__(self, settings: TlsSettings) -> None:
        self.settings = settings
        self._context = build_context(settings)
        self._stamps = _stamp(settings.watched_files())
        self._checked = float("-inf")

    def context(self, now: float) -> ssl.SSLContext:
        """The context for a new connection; `now` in seconds (the event loop's clock)."""
        if now - self._checked < RELOAD_CHECK_S:
            return self._context
        self._checked = now
        stamps = _stamp(self.settings.watched_files())
        if stamps != self._stamps:
            self._stamps = stamps
            try:
                self._context = build_context(self.settings)
            except TlsConfigError as e:
                log.warning("keeping the previous certificates: %s", e)
            else:
                files = ", ".join(self.settings.watched_files())
                log.info("listener %s: reloaded %s", self.settings.listener, files)
        return self._context

    def principal(self, ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> KafkaPrincipal:
        """ANONYMOUS without a client certificate; else the mapped subject DN (NoMatchingRule, or
        CertificateFormatError, when it cannot be named)."""
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        return self.settings.mapper.principal(der) or ANONYMOUS

    @property
    def authenticates_clients(self) -> bool:
        return self.settings.client_auth is ClientAuth.REQUIRED


def tls_listeners(listeners: tuple[Listener, ...], props: Mapping[str, str]) -> dict[str, TlsListener]:
    """A TlsListener per SSL / SASL_SSL listener (TlsConfigError on the first that cannot be built)."""
    return {x.name: TlsListener(TlsSettings.for_listener(x, props)) for x in listeners if x.protocol.tls}
