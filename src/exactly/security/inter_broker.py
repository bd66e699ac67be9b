"""The broker's own credentials towards other brokers: how its replica fetchers (and any other
broker-to-broker client) connect to a peer's inter-broker listener, from the broker's Kafka settings.

The security protocol is the one of `inter.broker.listener.name` in `listener.security.protocol.map` (the
same listener on every broker, as in Kafka). Then, as Kafka configures a broker's client side:

    TLS (SSL, SASL_SSL), each setting `listener.name.<l>.<name>` first, then `<name>`:
        ssl.truststore.location / ssl.truststore.certificates   the CAs the peer's certificate is checked
                                                                against (PEM; without: the system's CAs)
        ssl.keystore.location, or ssl.keystore.certificate.chain + ssl.keystore.key, ssl.key.password
                                                                the broker's own certificate, presented to
                                                                a peer that asks for one (PEM)
        ssl.endpoint.identification.algorithm                   https (default): the peer's certificate
                                                                must name the host it registered; empty:
                                                                not checked
    SASL (SASL_PLAINTEXT, SASL_SSL):
        sasl.mechanism.inter.broker.protocol                    PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
                                                                (Kafka's default GSSAPI is refused)
        listener.name.<l>.<mechanism, lower case>.sasl.jaas.config, else listener.name.<l>.sasl.jaas.config,
        else sasl.jaas.config: its `username="..." password="..."` options (PlainLoginModule's or
        ScramLoginModule's) are the broker's credentials. A PLAIN listener that lists its users in the same
        JAAS config (`user_<name>="<password>"`) must list the broker's user too; a SCRAM broker user must
        have a SCRAM credential (in a cluster: in ZooKeeper, `/config/users/<user>`, created before the
        brokers start, as with Kafka's `kafka-configs --zookeeper`).

The principal the peer sees is then `User:<username>` (SASL), or the one its `ssl.principal.mapping.rules`
make of our certificate (SSL). With an authorizer, that principal needs CLUSTER_ACTION on the cluster to
fetch as a follower: list it in `super.users` (Kafka's usual way) or grant it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

from exactly.client.security import ClientSecurity
from exactly.security.listeners import Listener, SecurityProtocol
from exactly.security.sasl import SCRAM_MECHANISMS, jaas_options
from exactly.security.tls import TlsSettings, build_client_context

__all__ = ["INTER_BROKER_MECHANISMS", "InterBrokerConfigError", "inter_broker_security"]

INTER_BROKER_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)


class InterBrokerConfigError(ValueError):
    """The inter-broker listener's client settings cannot be used (one readable line)."""


@dataclass(frozen=True, slots=True)
class _Jaas:
    username: str
    password: str


def _jaas(listener: Listener, mechanism: str, props: Mapping[str, str]) -> _Jaas:
    prefix = f"listener.name.{listener.name.lower()}."
    for key in (
        f"{prefix}{mechanism.lower()}.sasl.jaas.config",
        f"{prefix}sasl.jaas.config",
        "sasl.jaas.config",
    ):
        if key in props:
            options = jaas_options(props[key])
            username, password = options.get("username"), options.get("password")
            if not username or password is None:
                raise InterBrokerConfigError(
                    f'{key} has no username="..." password="...": the broker\'s own credentials for '
                    f"{mechanism} on the inter-broker listener {listener.name}"
                )
            return _Jaas(username, password)
    raise InterBrokerConfigError(
        f"no JAAS config with the broker's credentials for {mechanism} on the inter-broker listener "
        f"{listener.name}: set {prefix}{mechanism.lower()}.sasl.jaas.config"
    )


def inter_broker_security(listener: Listener, props: Mapping[str, str]) -> ClientSecurity | None:
    """How to connect to a peer's `listener` (the inter-broker listener); None for PLAINTEXT.
    InterBrokerConfigError when the settings do not say how."""
    protocol = listener.protocol
    if protocol is SecurityProtocol.PLAINTEXT:
        return None
    mechanism = ""
    username = password = ""
    if protocol.sasl:
        mechanism = props.get("sasl.mechanism.inter.broker.protocol", "GSSAPI").strip().upper()
        if mechanism not in INTER_BROKER_MECHANISMS:
            raise InterBrokerConfigError(
                f"sasl.mechanism.inter.broker.protocol {mechanism}: the inter-broker listener "
                f"{listener.name} is {protocol.value}, and exactly's brokers authenticate to each other with "
                f"{', '.join(INTER_BROKER_MECHANISMS)}"
            )
        jaas = _jaas(listener, mechanism, props)
        username, password = jaas.username, jaas.password
    tls_context = None
    check_hostname = True
    if protocol.tls:
        settings = TlsSettings.for_listener(listener, props)
        prefix = f"listener.name.{listener.name.lower()}."
        algorithm = props.get(
            prefix + "ssl.endpoint.identification.algorithm",
            props.get("ssl.endpoint.identification.algorithm", "https"),
        )
        check_hostname = algorithm.strip().lower() == "https"
        build_client_context(settings, check_hostname)  # fail now (TlsConfigError), not at each connection
        tls_context = partial(build_client_context, settings, check_hostname)
    return ClientSecurity(
        protocol=protocol,
        mechanism=mechanism or "GSSAPI",
        username=username,
        password=password,
        check_hostname=check_hostname,
        tls_context=tls_context,
    )
