"""Certificates for the TLS tests, made by `trustme`: one CA, a server certificate for 127.0.0.1 and
localhost, and client certificates whose subject is O=<org>, OU=<unit>, CN=<name> (DN "CN=..,OU=..,O=..")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography.hazmat.primitives import serialization


@dataclass(frozen=True)
class ClientCert:
    cert: Path  # the client's certificate (PEM)
    key: Path  # its private key (PEM, unencrypted)
    dn: str  # its subject as Kafka names it


@dataclass(frozen=True)
class TlsFiles:
    directory: Path
    ca_obj: trustme.CA
    ca: Path  # the CA certificate (trust store of both sides)
    server: Path  # the broker's key store: private key + certificate chain (PEM)

    def client(self, name: str, unit: str = "x", org: str = "y") -> ClientCert:
        leaf = self.ca_obj.issue_cert(
            f"{name}@example.com", common_name=name, organization_unit_name=unit, organization_name=org
        )
        cert, key = self.directory / f"{name}.crt", self.directory / f"{name}.key"
        leaf.cert_chain_pems[0].write_to_path(str(cert))
        leaf.private_key_pem.write_to_path(str(key))
        return ClientCert(cert, key, f"CN={name},OU={unit},O={org}")

    def encrypted_server_key_store(self, password: str) -> Path:
        """The server key store with its private key encrypted (PKCS#8) under `password`."""
        pem = self.server.read_bytes()
        block = re.search(rb"-----BEGIN ([A-Z ]*)PRIVATE KEY-----.*?-----END \1PRIVATE KEY-----\n", pem, re.S)
        assert block is not None
        start, end = block.span()
        key = serialization.load_pem_private_key(pem[start:end], None)
        encrypted = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password.encode()),
        )
        path = self.directory / "server-encrypted.pem"
        path.write_bytes(encrypted + pem[:start] + pem[end:])
        return path


def make_tls_files(directory: Path) -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="exactly tests")
    ca_path = directory / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_path))
    server = directory / "server.pem"
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(server))
    return TlsFiles(directory, ca, ca_path, server)


def ssl_settings(files: TlsFiles, client_auth: str = "required", key_store: Path | None = None) -> list[str]:
    """The broker settings of a PEM SSL listener (global ssl.* names)."""
    return [
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={key_store or files.server}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={files.ca}",
        f"ssl.client.auth={client_auth}",
    ]


def confluent_ssl(files: TlsFiles, client: ClientCert | None) -> dict[str, str]:
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(files.ca)}
    if client is not None:
        conf |= {"ssl.certificate.location": str(client.cert), "ssl.key.location": str(client.key)}
    return conf
