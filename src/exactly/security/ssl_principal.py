"""The principal of a TLS client: its certificate's subject DN, mapped by `ssl.principal.mapping.rules`.

Kafka's `DefaultKafkaPrincipalBuilder` names an SSL client `User:<name>`, where `<name>` is the subject of
the client's certificate as Java's `X500Principal.getName()` prints it (RFC 2253), passed through the
listener's `SslPrincipalMapper`. Without a client certificate the principal is `User:ANONYMOUS`.

The DN, as RFC 2253 and Java write it (`subject_dn`):

    the RDNs of the certificate's subject in reverse order of their DER encoding, joined by ","; the
    attributes of a multi-valued RDN joined by "+"; each attribute `KEYWORD=value` for CN, C, L, ST, O, OU,
    STREET, DC and UID, else `<dotted OID>=#<lower-case hex of the value's DER encoding>`; in a value,
    each of  , = + < > # ; " \\  is preceded by a backslash, and so is a leading or trailing space.

so a certificate issued to "C=US, O=y, OU=x, CN=alice" is `CN=alice,OU=x,O=y,C=US`.

Mapping rules (Kafka's syntax, comma-separated, tried in order, the first that applies wins):

    DEFAULT                         the DN unchanged
    RULE:pattern/replacement/       when the Java regex `pattern` matches the whole DN: the DN with every
    RULE:pattern/replacement/L      match of `pattern` replaced by `replacement` ($1 is group 1; a group
    RULE:pattern/replacement/U      number beyond the pattern's groups is literal), then lower/upper-cased

e.g. `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT`. When no rule applies, Kafka fails the
authentication (`NoMatchingRule`): so does exactly (the connection is closed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from exactly.security.principal import KafkaPrincipal

# --- the subject DN of a DER certificate ------------------------------------------------------------------

_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.9": "STREET",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string tags -> codec
_STRINGS = {
    0x0C: "utf-8",  # UTF8String
    0x13: "ascii",  # PrintableString
    0x16: "ascii",  # IA5String
    0x1A: "ascii",  # VisibleString
    0x14: "latin-1",  # TeletexString (as Java reads it)
    0x1E: "utf-16-be",  # BMPString
    0x1C: "utf-32-be",  # UniversalString
}
_SEQUENCE, _SET, _OID = 0x30, 0x31, 0x06
_ESCAPED = ',=+<>#;"\\'


class CertificateFormatError(ValueError):
    """The DER bytes are not an X.509 certificate this parser understands."""


def _tlv(der: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of the value, end of the value) of the DER element at `pos`."""
    if pos + 2 > len(der):
        raise CertificateFormatError("truncated DER")
    tag, length = der[pos], der[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or pos + count > len(der):
            raise CertificateFormatError("bad DER length")
        length = int.from_bytes(der[pos : pos + count], "big")
        pos += count
    if pos + length > len(der):
        raise CertificateFormatError("truncated DER")
    return tag, pos, pos + length


def _children(der: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, value start, value end, element start) of each element in der[start:end]."""
    out = []
    pos = start
    while pos < end:
        tag, vstart, vend = _tlv(der, pos)
        out.append((tag, vstart, vend, pos))
        pos = vend
    return out


def _oid(value: bytes) -> str:
    arcs: list[int] = []
    current = 0
    for byte in value:
        current = (current << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(current)
            current = 0
    if not arcs:
        raise CertificateFormatError("empty OID")
    first = arcs[0]
    head = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    return ".".join(str(a) for a in head + arcs[1:])


def escape_value(text: str) -> str:
    """An attribute value as RFC 2253 (and Java) writes it."""
    out = "".join("\\" + c if c in _ESCAPED else ("\\00" if c == "\0" else c) for c in text)
    if out.startswith(" "):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def _attribute(der: bytes, start: int, end: int) -> str:
    parts = _children(der, start, end)
    if len(parts) != 2 or parts[0][0] != _OID:
        raise CertificateFormatError("bad AttributeTypeAndValue")
    oid = _oid(der[parts[0][1] : parts[0][2]])
    tag, vstart, vend, element = parts[1]
    keyword = _KEYWORDS.get(oid)
    codec = _STRINGS.get(tag)
    if keyword is not None and codec is not None:
        try:
            return f"{keyword}={escape_value(der[vstart:vend].decode(codec))}"
        except UnicodeDecodeError:
            pass
    return f"{keyword or oid}=#{der[element:vend].hex()}"


def subject_dn(der: bytes) -> str:
    """The subject of a DER X.509 certificate as `X500Principal.getName()` (RFC 2253) prints it."""
    tag, start, end = _tlv(der, 0)
    if tag != _SEQUENCE:
        raise CertificateFormatError("not a certificate")
    tag, start, end = _tlv(der, start)  # tbsCertificate
    if tag != _SEQUENCE:
        raise CertificateFormatError("not a certificate")
    fields = _children(der, start, end)
    if fields and fields[0][0] == 0xA0:  # [0] EXPLICIT version
        fields = fields[1:]
    if len(fields) < 5:
        raise CertificateFormatError("truncated tbsCertificate")
    _, name_start, name_end, _ = fields[4]  # serial, signature, issuer, validity, subject
    rdns = []
    for rdn_tag, rdn_start, rdn_end, _ in _children(der, name_start, name_end):
        if rdn_tag != _SET:
            raise CertificateFormatError("bad RelativeDistinguishedName")
        rdns.append("+".join(_attribute(der, s, e) for _, s, e, _ in _children(der, rdn_start, rdn_end)))
    return ",".join(reversed(rdns))


# --- ssl.principal.mapping.rules ---------------------------------------------------------------------------

_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE)


class NoMatchingRule(ValueError):
    """No mapping rule applies to a DN (Kafka fails the authentication)."""


@dataclass(frozen=True, slots=True)
class MappingRule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        groups = self.pattern.groups
        result = self.pattern.sub(lambda m: _java_replacement(self.replacement, m, groups), dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        suffix = f"/{self.case}" if self.case else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{suffix}"


def _java_replacement(replacement: str, match: re.Match[str], groups: int) -> str:
    """Java's `Matcher.appendReplacement` with Kafka's treatment of back references beyond the groups
    (literal): `\\x` is x, `$n` is group n (as many digits as name an existing group)."""
    out: list[str] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            j = i + 1
            number = int(replacement[j])
            if number > groups:
                out.append("$")
                i += 1
                continue
            j += 1
            while j < len(replacement) and replacement[j].isdigit():
                longer = number * 10 + int(replacement[j])
                if longer > groups:
                    break
                number = longer
                j += 1
            out.append(match.group(number) or "")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class SslPrincipalMapper:
    rules: tuple[MappingRule, ...]

    @classmethod
    def parse(cls, text: str | None) -> SslPrincipalMapper:
        """Kafka's rule syntax; ValueError naming the rule that is not valid."""
        source = "DEFAULT" if text is None else text.strip()
        rules: list[MappingRule] = []
        for split in _RULE_SPLITTER.finditer(source):
            rule = split.group(1)
            match = _RULE_PARSER.match(rule)
            if match is None:
                raise ValueError(f"Invalid rule: {rule}")
            if match.end() != len(rule):
                raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[match.end() :]}`")
            if match.group(1) is not None:
                rules.append(MappingRule(None))
            elif match.group(2) is not None:
                try:
                    pattern = re.compile(match.group(2))
                except re.error as e:
                    raise ValueError(f"Invalid rule: `{rule}`: {e}") from None
                rules.append(MappingRule(pattern, match.group(4), match.group(6)))
        return cls(tuple(rules))

    def name(self, dn: str) -> str:
        for rule in self.rules:
            mapped = rule.apply(dn)
            if mapped is not None:
                return mapped
        rules = ", ".join(map(str, self.rules))
        raise NoMatchingRule(f"No rules apply to {dn}, rules [{rules}]")

    def principal(self, certificate_der: bytes | None) -> KafkaPrincipal | None:
        """The principal of a client with this certificate (None without one: ANONYMOUS)."""
        if certificate_der is None:
            return None
        return KafkaPrincipal.user(self.name(subject_dn(certificate_der)))
