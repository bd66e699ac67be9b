"""Who a connection is: Kafka's `KafkaPrincipal` ("User:alice").

A connection starts as `ANONYMOUS` (Kafka's principal on a PLAINTEXT listener, and on SSL without a client
certificate); TLS client authentication or SASL replaces it once the peer has proved who it is. Authorizers
and ACLs speak in principals; their text form is `<type>:<name>`, and `User` is the only type Kafka's own
authenticators produce.
"""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`User:alice` -> KafkaPrincipal("User", "alice"); raises ValueError without a type."""
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"expected <type>:<name>, got {text!r}")
        return cls(kind, name)

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
