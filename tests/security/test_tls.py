"""SSLContext of a listener from Kafka's ssl.* settings (real files made by trustme; real TLS handshakes
over a socket pair where behaviour matters)."""

from __future__ import annotations

import os
import re
import socket
import ssl
import threading
from pathlib import Path

import pytest

from exactly.broker.config import BrokerConfig, ConfigError
from exactly.security.listeners import Listener, SecurityProtocol
from exactly.security.principal import ANONYMOUS, KafkaPrincipal
from exactly.security.tls import (
    ClientAuth,
    TlsConfigError,
    TlsListener,
    TlsSettings,
    build_context,
    normalise_pem,
    openssl_cipher_name,
)
from tests.interop.tls_support import ClientCert, TlsFiles, make_tls_files

SSL_LISTENER = Listener("SSL", "127.0.0.1", 0, SecurityProtocol.SSL, "127.0.0.1", 0)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("certs"))


def _props(files: TlsFiles, **extra: str) -> dict[str, str]:
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(files.server),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(files.ca),
        **{k.replace("_", "."): v for k, v in extra.items()},
    }


def _settings(props: dict[str, str], listener: Listener = SSL_LISTENER) -> TlsSettings:
    return TlsSettings.for_listener(listener, props)


def _handshake(
    server_ctx: ssl.SSLContext, files: TlsFiles, client: ClientCert | None, **client_opts: object
) -> tuple[bytes | None, str | None, str | None]:
    """A real handshake over a socket pair: (client cert DER the server saw, version, error)."""
    client_ctx = ssl.create_default_context(cafile=str(files.ca))
    if client is not None:
        client_ctx.load_cert_chain(str(client.cert), str(client.key))
    for name, value in client_opts.items():
        setattr(client_ctx, name, value)
    a, b = socket.socketpair()
    seen: dict[str, object] = {}

    def serve() -> None:
        try:
            with server_ctx.wrap_socket(a, server_side=True) as s:
                seen["der"] = s.getpeercert(binary_form=True)
                seen["version"] = s.version()
                s.recv(1)
        except (ssl.SSLError, OSError) as e:
            seen["error"] = str(e)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client_ctx.wrap_socket(b, server_hostname="localhost") as c:
            c.sendall(b"x")
            c.recv(1)
    except (ssl.SSLError, OSError) as e:
        seen.setdefault("client_error", str(e))
    thread.join(10)
    error = seen.get("error")
    return seen.get("der"), seen.get("version"), str(error) if error else None  # type: ignore[return-value]


def test_mutual_tls_names_the_client_and_refuses_one_without_a_certificate(files: TlsFiles) -> None:
    tls = TlsListener(_settings(_props(files, ssl_client_auth="required")))
    alice = files.client("alice")
    der, _, error = _handshake(tls.context(0.0), files, alice)
    assert error is None
    assert der is not None
    assert tls.settings.mapper.principal(der) == KafkaPrincipal.user("CN=alice,OU=x,O=y")
    _, _, error = _handshake(tls.context(0.0), files, None)
    assert error is not None
    assert "CERTIFICATE" in error.upper()


def test_requested_client_auth_lets_a_client_without_a_certificate_in(files: TlsFiles) -> None:
    tls = TlsListener(_settings(_props(files, ssl_client_auth="requested")))
    der, _, error = _handshake(tls.context(0.0), files, None)
    assert error is None
    assert der is None
    assert tls.principal(None) == ANONYMOUS


def test_enabled_protocols_and_ssl_protocol_bound_the_version(files: TlsFiles) -> None:
    only12 = build_context(_settings(_props(files, ssl_protocol="TLSv1.2")))
    assert only12.maximum_version == ssl.TLSVersion.TLSv1_2
    _, version, _ = _handshake(only12, files, None)
    assert version == "TLSv1.2"
    only13 = build_context(_settings(_props(files, ssl_enabled_protocols="TLSv1.3")))
    _, _, error = _handshake(only13, files, None, maximum_version=ssl.TLSVersion.TLSv1_2)
    assert error is not None
    with pytest.raises(TlsConfigError, match=re.escape("allows none of ssl.enabled.protocols")):
        build_context(_settings(_props(files, ssl_enabled_protocols="TLSv1.3", ssl_protocol="TLSv1.2")))


def test_cipher_suites_take_kafka_names(files: TlsFiles) -> None:
    assert openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384") == "ECDHE-ECDSA-AES256-GCM-SHA384"
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256") == "ECDHE-RSA-CHACHA20-POLY1305"
    assert openssl_cipher_name("TLS_RSA_WITH_AES_128_CBC_SHA") == "AES128-SHA"
    ctx = build_context(
        _settings(
            _props(files, ssl_cipher_suites="TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", ssl_protocol="TLSv1.2")
        )
    )
    tls12 = [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 == ["ECDHE-ECDSA-AES128-GCM-SHA256"]
    with pytest.raises(TlsConfigError, match=re.escape("unknown ssl.cipher.suites: TLS_NOPE_WITH_NOTHING")):
        build_context(_settings(_props(files, ssl_cipher_suites="TLS_NOPE_WITH_NOTHING")))
    only13 = build_context(_settings(_props(files, ssl_cipher_suites="TLS_AES_256_GCM_SHA384")))
    assert only13.minimum_version == ssl.TLSVersion.TLSv1_3


def test_inline_pem_on_one_line_with_escaped_newlines(files: TlsFiles) -> None:
    pem = files.server.read_text()
    key_end = pem.index("-----BEGIN CERTIFICATE-----")
    key, chain = pem[:key_end], pem[key_end:]
    props = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": key.replace("\n", "\\n"),
        "ssl.keystore.certificate.chain": " ".join(chain.split("\n")),  # one line, blanks for breaks
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": files.ca.read_text().replace("\n", " "),
        "ssl.client.auth": "required",
    }
    tls = TlsListener(_settings(props))
    der, _, error = _handshake(tls.context(0.0), files, files.client("carol"))
    assert error is None
    assert der is not None
    assert normalise_pem(props["ssl.keystore.certificate.chain"]) == normalise_pem(chain)


def test_listener_prefixed_settings_win_and_sasl_ssl_reads_client_auth_only_prefixed(files: TlsFiles) -> None:
    props = _props(files, ssl_client_auth="required") | {"listener.name.ssl.ssl.client.auth": "requested"}
    assert _settings(props).client_auth is ClientAuth.REQUESTED
    sasl_ssl = Listener("SECURE", "127.0.0.1", 0, SecurityProtocol.SASL_SSL, "127.0.0.1", 0)
    assert _settings(_props(files, ssl_client_auth="required"), sasl_ssl).client_auth is ClientAuth.NONE
    prefixed = _props(files) | {"listener.name.secure.ssl.client.auth": "required"}
    assert _settings(prefixed, sasl_ssl).client_auth is ClientAuth.REQUIRED


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ssl.keystore.location": None}, "needs a key store: ssl.keystore.location, or"),
        ({"ssl.keystore.type": "PKCS12"}, "ssl.keystore.type PKCS12 is not supported"),
        ({"ssl.truststore.type": "JKS"}, "ssl.truststore.type JKS is not supported"),
        ({"ssl.keystore.location": "/nonexistent.pem"}, "cannot read ssl.keystore.location /nonexistent.pem"),
        ({"ssl.keystore.location": "CA"}, "no PEM private key in"),
        ({"ssl.truststore.location": "SERVER_KEY_ONLY"}, "no PEM certificate in"),
    ],
)
def test_unusable_stores_are_one_line(files: TlsFiles, change: dict[str, str | None], message: str) -> None:
    props = _props(files)
    key_only = files.directory / "key-only.pem"
    key_only.write_text(files.server.read_text().split("-----BEGIN CERTIFICATE-----")[0])
    for name, value in change.items():
        if value is None:
            props.pop(name)
        else:
            props[name] = {"CA": str(files.ca), "SERVER_KEY_ONLY": str(key_only)}.get(value, value)
    with pytest.raises(TlsConfigError, match=re.escape(message)) as raised:
        build_context(_settings(props))
    assert "\n" not in str(raised.value)


def test_an_encrypted_key_needs_its_password(files: TlsFiles) -> None:
    encrypted = files.encrypted_server_key_store("pw")
    props = _props(files) | {"ssl.keystore.location": str(encrypted)}
    with pytest.raises(TlsConfigError, match=re.escape("is encrypted: set ssl.key.password")):
        build_context(_settings(props))
    with pytest.raises(TlsConfigError, match=re.escape("ssl.key.password does not decrypt the private key")):
        build_context(_settings(props | {"ssl.key.password": "wrong"}))
    build_context(_settings(props | {"ssl.key.password": "pw"}))
    assert "pw" not in repr(_settings(props | {"ssl.key.password": "pw"}))


def test_new_key_store_files_are_picked_up_and_bad_ones_keep_the_old_context(
    files: TlsFiles, tmp_path: Path
) -> None:
    store = tmp_path / "server.pem"
    store.write_text(files.server.read_text())
    tls = TlsListener(_settings(_props(files) | {"ssl.keystore.location": str(store)}))
    first = tls.context(0.0)
    assert tls.context(0.5) is first  # not looked at within a second
    other = make_tls_files(tmp_path / "other")
    store.write_text(other.server.read_text())
    os.utime(store, ns=(1, 1))  # a different mtime whatever the clock's resolution
    second = tls.context(2.0)
    assert second is not first
    _, _, error = _handshake(second, other, None)  # the new certificate (signed by the other CA)
    assert error is None
    store.write_text("garbage")
    os.utime(store, ns=(2, 2))
    assert tls.context(4.0) is second


def test_broker_config_validates_ssl_values_and_keeps_listener_prefixed_names() -> None:
    config = BrokerConfig.from_properties(
        {"listener.name.ssl.ssl.client.auth": "required", "ssl.enabled.protocols": "TLSv1.3"}
    )
    assert config.properties["listener.name.ssl.ssl.client.auth"] == "required"
    with pytest.raises(ConfigError, match=re.escape("configuration listener.name.ssl.ssl.client.auth")):
        BrokerConfig.from_properties({"listener.name.ssl.ssl.client.auth": "sometimes"})
    with pytest.raises(ConfigError, match=re.escape("ssl.enabled.protocols")):
        BrokerConfig.from_properties({"ssl.enabled.protocols": "TLSv1.0"})
