"""A minimal blocking client on our own codecs, for tests that send hand-made (or broken) frames."""

from __future__ import annotations

import socket
import struct
from typing import Any

import scramp

from exactly.protocol.api import decode_response, encode_request
from exactly.protocol.framing import FrameDecoder
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from exactly.protocol.messages.sasl_handshake import SaslHandshakeRequest


class RawClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0, client_id: str = "raw-test") -> None:
        self.client_id = client_id
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.decoder = FrameDecoder()
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(payload)

    def send_frame(self, frame_body: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(frame_body)) + frame_body)

    def read_frame(self) -> bytes:
        while True:
            frame = self.decoder.next_frame()
            if frame is not None:
                return frame
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("connection closed by the broker")
            self.decoder.feed(data)

    def request(self, api_key: int, version: int, body: Any) -> Any:
        self.correlation_id += 1
        self.sock.sendall(encode_request(api_key, version, self.correlation_id, self.client_id, body))
        correlation_id, response = decode_response(api_key, version, self.read_frame())
        assert correlation_id == self.correlation_id
        return response

    def login(self, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> RawClient:
        """Authenticate on a SASL listener (SaslHandshake v1, then SaslAuthenticate v2 per token) as
        `user`; AssertionError with the broker's message if it refuses."""
        handshake = self.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism))
        assert handshake.error_code == 0, (mechanism, handshake.error_code, handshake.mechanisms)
        if mechanism == "PLAIN":
            self._token(f"\0{user}\0{password}".encode())
            return self
        scram = scramp.ScramClient([mechanism], user, password)
        scram.set_server_first(self._token(scram.get_client_first().encode()).decode())
        scram.set_server_final(self._token(scram.get_client_final().encode()).decode())  # checks the server
        return self

    def _token(self, token: bytes) -> bytes:
        answer = self.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(token))
        assert answer.error_code == 0, (answer.error_code, answer.error_message)
        return bytes(answer.auth_bytes)

    def is_closed_by_peer(self, wait: float = 5.0) -> bool:
        self.sock.settimeout(wait)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
