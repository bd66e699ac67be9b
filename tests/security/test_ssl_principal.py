"""A TLS client's principal: the certificate's subject DN as Java prints it, and Kafka's mapping rules."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from exactly.security.principal import KafkaPrincipal
from exactly.security.ssl_principal import (
    NoMatchingRule,
    SslPrincipalMapper,
    escape_value,
    subject_dn,
)


def _der(name: x509.Name) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "issuer")]))
        .public_key(key.public_key())
        .serial_number(12345)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.DER)


def _attr(oid: x509.ObjectIdentifier, value: str) -> x509.NameAttribute:  # type: ignore[type-arg]
    return x509.NameAttribute(oid, value)


def test_the_dn_lists_the_rdns_most_specific_first_with_java_keywords() -> None:
    name = x509.Name(
        [
            _attr(NameOID.COUNTRY_NAME, "US"),
            _attr(NameOID.STATE_OR_PROVINCE_NAME, "CA"),
            _attr(NameOID.LOCALITY_NAME, "Palo Alto"),
            _attr(NameOID.ORGANIZATION_NAME, "Sun Microsystems"),
            _attr(NameOID.ORGANIZATIONAL_UNIT_NAME, "JavaSoft"),
            _attr(NameOID.COMMON_NAME, "Duke"),
        ]
    )
    dn = subject_dn(_der(name))
    assert dn == "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US"
    assert dn == name.rfc4514_string()  # the same as RFC 4514 where the two agree


def test_domain_components_uid_and_street_have_keywords() -> None:
    name = x509.Name(
        [
            _attr(NameOID.DOMAIN_COMPONENT, "com"),
            _attr(NameOID.DOMAIN_COMPONENT, "example"),
            _attr(NameOID.STREET_ADDRESS, "Main St"),
            _attr(NameOID.USER_ID, "u1"),
        ]
    )
    assert subject_dn(_der(name)) == "UID=u1,STREET=Main St,DC=example,DC=com"


def test_other_attributes_are_an_oid_and_the_hex_of_their_der_value() -> None:
    name = x509.Name([_attr(NameOID.EMAIL_ADDRESS, "a@b.c"), _attr(NameOID.COMMON_NAME, "alice")])
    # emailAddress is an IA5String (tag 0x16), 5 bytes long
    # (Java's RFC 2253 form; cryptography's RFC 4514 string would print the text instead)
    assert subject_dn(_der(name)) == "CN=alice,1.2.840.113549.1.9.1=#1605" + b"a@b.c".hex()


def test_a_multi_valued_rdn_is_joined_by_plus() -> None:
    name = x509.Name(
        [
            x509.RelativeDistinguishedName([_attr(NameOID.ORGANIZATION_NAME, "y")]),
            x509.RelativeDistinguishedName(
                [_attr(NameOID.COMMON_NAME, "alice"), _attr(NameOID.ORGANIZATIONAL_UNIT_NAME, "x")]
            ),
        ]
    )
    dn = subject_dn(_der(name))
    assert dn in ("CN=alice+OU=x,O=y", "OU=x+CN=alice,O=y")  # DER orders a SET by its encoding


def test_values_are_escaped_as_java_does() -> None:
    name = x509.Name([_attr(NameOID.COMMON_NAME, 'Tkac, Adam+"x"<y>;z=#1\\')])
    assert subject_dn(_der(name)) == 'CN=Tkac\\, Adam\\+\\"x\\"\\<y\\>\\;z\\=\\#1\\\\'
    assert escape_value(" lead and trail ") == "\\ lead and trail\\ "
    assert escape_value("ünïcode") == "ünïcode"


def test_a_utf8_subject_is_decoded() -> None:
    name = x509.Name([_attr(NameOID.COMMON_NAME, "Zoë Ørsted")])
    assert subject_dn(_der(name)) == "CN=Zoë Ørsted"


@pytest.mark.parametrize(
    ("rules", "dn", "name"),
    [
        ("DEFAULT", "CN=alice,OU=x,O=y", "CN=alice,OU=x,O=y"),
        (None, "CN=alice,OU=x,O=y", "CN=alice,OU=x,O=y"),
        (
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT",
            "CN=kafka-server,OU=ServiceUsers,O=Org",
            "kafka-server",
        ),
        (
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT",
            "CN=alice,OU=People,O=Org",
            "CN=alice,OU=People,O=Org",
        ),
        (
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
            "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US",
            "duke@javasoft",
        ),
        (
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/U",
            "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US",
            "DUKE@JAVASOFT",
        ),
        (
            "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
            "cn=duke,ou=javasoft,dc=x,dc=com",
            "DUKE@JAVASOFT",
        ),
        # a comma inside the pattern (escaped in the DN) and spaces around the rules
        (
            " RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/ , DEFAULT ",
            "CN=Tkac\\, Adam,OU=ITZ,DC=geodis",
            "Tkac\\, Adam",
        ),
        # a back reference beyond the pattern's groups is literal; \\$ is a literal $
        ("RULE:^CN=(.*)$/$1$2/", "CN=x", "x$2"),
        ("RULE:^CN=(.*)$/\\$$1/", "CN=x", "$x"),
        # the first rule that applies wins
        ("RULE:^CN=a.*$/first/,RULE:^CN=.*$/second/", "CN=ab", "first"),
    ],
)
def test_mapping_rules(rules: str | None, dn: str, name: str) -> None:
    assert SslPrincipalMapper.parse(rules).name(dn) == name


def test_no_matching_rule_is_an_error() -> None:
    mapper = SslPrincipalMapper.parse("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRule, match=r"No rules apply to CN=Duke,OU=JavaSoft"):
        mapper.name("CN=Duke,OU=JavaSoft")


@pytest.mark.parametrize(
    "rules",
    [
        "RULE:a/b/Lx",
        "DEFAULT garbage",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "something",
        "RULE:^CN=((/$1/",
    ],
)
def test_invalid_rules_are_refused(rules: str) -> None:
    with pytest.raises(ValueError, match="Invalid rule"):
        SslPrincipalMapper.parse(rules)


def test_principal_of_a_certificate_and_of_none() -> None:
    der = _der(x509.Name([_attr(NameOID.ORGANIZATION_NAME, "y"), _attr(NameOID.COMMON_NAME, "alice")]))
    mapper = SslPrincipalMapper.parse("RULE:^CN=([^,]*),.*$/$1/")
    assert mapper.principal(der) == KafkaPrincipal.user("alice")
    assert mapper.principal(None) is None
