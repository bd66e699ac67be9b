"""exactly.client.security: the librdkafka settings the 2PC client reads (its TLS and SASL are exercised
against the broker in tests/interop/test_sasl.py and tests/spark/test_security.py)."""

from __future__ import annotations

import pytest

from exactly.client.security import ClientSecurity
from exactly.security.listeners import SecurityProtocol


def test_librdkafka_names_and_defaults() -> None:
    assert ClientSecurity.from_config({"linger.ms": "5"}) == ClientSecurity()
    conf = {
        "security.protocol": "sasl_ssl",
        "sasl.mechanisms": "scram-sha-512",
        "sasl.username": "u",
        "sasl.password": "p",
        "ssl.ca.location": "/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
    }
    got = ClientSecurity.from_config(conf)
    assert (got.protocol, got.mechanism, got.username, got.password) == (
        SecurityProtocol.SASL_SSL,
        "SCRAM-SHA-512",
        "u",
        "p",
    )
    assert (got.ca_location, got.check_hostname, got.verify) == ("/ca.pem", False, True)


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"security.protocol": "tls"}, "security.protocol 'TLS'"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism 'GSSAPI'"),
        ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism 'GSSAPI'"),  # librdkafka's default
    ],
)
def test_what_it_cannot_do_is_refused(conf: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ClientSecurity.from_config(conf)
