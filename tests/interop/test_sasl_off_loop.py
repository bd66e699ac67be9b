"""SASL PLAIN checked against a stored SCRAM credential salts and hashes the password (PBKDF2) in a thread:
while one connection's password is being checked, the broker keeps serving the others.

The user's credential has 2,000,000 iterations (about a second of PBKDF2; written into the metadata log
before the broker starts, since AlterUserScramCredentials allows at most 16,384), so the check is long
enough to see: another connection must get many answers while the authenticating one has none yet. With
the derivation on the event loop it would get at most the one answer it asked for before the loop
stalled.
"""

from __future__ import annotations

import select
import time
from pathlib import Path

import pytest

from exactly.cluster.metadata import ClusterMetadata
from exactly.errors import ErrorCode
from exactly.protocol.api import decode_response, encode_request
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from exactly.protocol.messages.sasl_handshake import SaslHandshakeRequest
from exactly.security.sasl import make_scram_credential
from exactly.testing.processes import free_port
from tests.interop.client import RawClient
from tests.interop.support import running_broker

pytestmark = pytest.mark.interop

ITERATIONS = 2_000_000
USER, PASSWORD = "slow-user", "slow-user-pw"


def test_other_connections_are_served_while_a_password_is_checked(tmp_path: Path) -> None:
    data = tmp_path / "data"
    metadata = ClusterMetadata(data)
    try:
        credential = make_scram_credential("SCRAM-SHA-256", PASSWORD, ITERATIONS)
        metadata.set_scram_credential(USER, "SCRAM-SHA-256", credential)
    finally:
        metadata.close()
    sasl_port, plain_port = free_port(), free_port()
    settings = (
        f"listeners=SASL_PLAINTEXT://127.0.0.1:{sasl_port},PLAINTEXT://127.0.0.1:{plain_port}",
        "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
    )
    with running_broker(data, *settings, port=plain_port) as proc:
        slow, other = RawClient(f"127.0.0.1:{sasl_port}"), RawClient(proc.bootstrap)
        try:
            assert slow.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest("PLAIN")).error_code == 0
            token = SaslAuthenticateRequest(f"\0{USER}\0{PASSWORD}".encode())
            slow.send_raw(encode_request(ApiKey.SASL_AUTHENTICATE, 2, 99, "slow", token))
            started = time.monotonic()
            served, slowest = 0, 0.0
            while not select.select([slow.sock], [], [], 0)[0]:  # no answer to the password yet
                sent = time.monotonic()
                assert other.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest()).error_code == 0
                slowest = max(slowest, time.monotonic() - sent)
                served += 1
                assert time.monotonic() - started < 120, "no answer to SaslAuthenticate"
            took = time.monotonic() - started
            correlation_id, answer = decode_response(ApiKey.SASL_AUTHENTICATE, 2, slow.read_frame())
            assert (correlation_id, answer.error_code) == (99, ErrorCode.NONE)
        finally:
            slow.close()
            other.close()
        print(
            f"password check {took:.2f} s; {served} requests served meanwhile, slowest {slowest * 1e3:.0f} ms"
        )
        assert served >= 20, (served, took)
        assert f"authenticated as User:{USER} (PLAIN)" in proc.full_log()
