"""A minimal blocking client on our own codecs, for tests that send hand-made (or broken) frames."""

from __future__ import annotations

import socket
import struct
from typing import Any

from exactly.protocol.api import decode_response, encode_request
from exactly.protocol.framing import FrameDecoder


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

    def is_closed_by_peer(self, wait: float = 5.0) -> bool:
        self.sock.settimeout(wait)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
