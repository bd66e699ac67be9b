"""Request frames as the real clients send them, against our codec.

Live (`interop`): confluent-kafka (librdkafka 2.16), kafka-python 3.0.12 and aiokafka 0.14 run their
scenarios (admin create_topics, plain + idempotent produce, a group consumer that fetches and commits,
a transactional producer doing init/begin/produce/send_offsets/commit) against `tests.interop.golden`'s
fake broker, which decodes and answers everything with our codec. Every frame must decode, re-encode to
the same bytes, and the (api, version) pairs each client used must be exactly the expected ones.

Offline: the frames saved by `python -m tests.interop.golden --record tests/protocol/golden` (at most two
per client, api and version) must decode and re-encode byte for byte.

Re-encoding is exact for every frame but one kind: librdkafka's "all topics" Metadata request
(`AdminClient.list_topics`, topics = null). For flexible versions librdkafka reserves a 4-byte
array-count placeholder and, for a null array, only rewrites its first byte, so the body reads (as
Kafka's own parser reads it) topics = null, allow_auto_topic_creation = false,
include_topic_authorized_operations = false, no tags - followed by 3 stray bytes `01 00 00` (what
librdkafka meant as allow_auto_topic_creation = true, include_topic_authorized_operations = false, no
tags). `decode_request` ignores trailing bytes as Kafka does; `assert_reencodes` allows exactly this.
"""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from exactly.protocol.api import API_SPECS, decode_request, decode_response
from exactly.protocol.messages import ApiKey
from tests.interop.golden import ADVERTISED, SCENARIOS, UNSUPPORTED_VERSION, GoldenServer, capture, reencode

GOLDEN_DIR = Path(__file__).parent / "golden"
LIBRDKAFKA_ALL_TOPICS_TAIL = b"\x01\x00\x00"

# Highest version each client implements for the APIs its scenario uses: kafka-wire.md §1.2 (observed
# against Kafka 4.2 maxima) and §1.1/§1.2 source notes. Each client settles on min(its max, our
# advertised max) - for aiokafka "the highest version it implements inside the broker range", the same
# here - so the expected versions are derived, not copied from the run. ApiVersions is the version each
# client opens with (librdkafka 3, kafka-python 4 = its max, aiokafka always 0); all are advertised.
CLIENT_MAX: dict[str, dict[ApiKey, int]] = {
    "librdkafka": {
        ApiKey.API_VERSIONS: 3,
        ApiKey.METADATA: 13,
        ApiKey.CREATE_TOPICS: 4,
        ApiKey.PRODUCE: 10,
        ApiKey.FETCH: 16,
        ApiKey.LIST_OFFSETS: 7,
        ApiKey.FIND_COORDINATOR: 2,
        ApiKey.JOIN_GROUP: 5,
        ApiKey.SYNC_GROUP: 3,
        ApiKey.HEARTBEAT: 3,
        ApiKey.LEAVE_GROUP: 1,
        ApiKey.OFFSET_COMMIT: 9,
        ApiKey.OFFSET_FETCH: 9,
        ApiKey.INIT_PRODUCER_ID: 4,
        ApiKey.ADD_PARTITIONS_TO_TXN: 0,
        ApiKey.ADD_OFFSETS_TO_TXN: 0,
        ApiKey.END_TXN: 1,
        ApiKey.TXN_OFFSET_COMMIT: 3,
    },
    "kafka-python": {
        ApiKey.API_VERSIONS: 4,
        ApiKey.METADATA: 13,
        ApiKey.CREATE_TOPICS: 7,
        ApiKey.PRODUCE: 9,  # sender.py cap
        ApiKey.FETCH: 12,  # fetcher.py cap
        ApiKey.LIST_OFFSETS: 11,
        ApiKey.FIND_COORDINATOR: 6,
        ApiKey.JOIN_GROUP: 7,
        ApiKey.SYNC_GROUP: 5,
        ApiKey.HEARTBEAT: 4,
        ApiKey.LEAVE_GROUP: 5,
        ApiKey.OFFSET_COMMIT: 8,
        ApiKey.OFFSET_FETCH: 8,
        ApiKey.INIT_PRODUCER_ID: 4,
        ApiKey.ADD_PARTITIONS_TO_TXN: 3,
        ApiKey.ADD_OFFSETS_TO_TXN: 3,
        ApiKey.END_TXN: 3,
        ApiKey.TXN_OFFSET_COMMIT: 3,
    },
    "aiokafka": {
        ApiKey.API_VERSIONS: 0,
        ApiKey.METADATA: 5,
        ApiKey.CREATE_TOPICS: 3,
        ApiKey.PRODUCE: 7,
        ApiKey.FETCH: 11,
        ApiKey.LIST_OFFSETS: 3,
        ApiKey.FIND_COORDINATOR: 1,
        ApiKey.JOIN_GROUP: 5,
        ApiKey.SYNC_GROUP: 3,
        ApiKey.HEARTBEAT: 1,
        ApiKey.LEAVE_GROUP: 1,
        ApiKey.OFFSET_COMMIT: 3,
        ApiKey.OFFSET_FETCH: 3,
        ApiKey.INIT_PRODUCER_ID: 0,
        ApiKey.ADD_PARTITIONS_TO_TXN: 0,
        ApiKey.ADD_OFFSETS_TO_TXN: 0,
        ApiKey.END_TXN: 0,
        ApiKey.TXN_OFFSET_COMMIT: 0,
    },
}

EXPECTED: dict[str, set[tuple[int, int]]] = {
    client: {(key, min(top, ADVERTISED[key][1])) for key, top in maxima.items()}
    for client, maxima in CLIENT_MAX.items()
}


def test_expected_versions_match_kafka_wire_verified_profile() -> None:
    # kafka-wire.md §1.3 "Verified profile": chosen versions librdkafka Produce 9 / Fetch 12 / Metadata 12 /
    # OffsetCommit 8; kafka-python Produce 9 / Fetch 12 / FindCoordinator 4; the transaction APIs as in §1.2.
    assert {
        (ApiKey.PRODUCE, 9),
        (ApiKey.FETCH, 12),
        (ApiKey.METADATA, 12),
        (ApiKey.OFFSET_COMMIT, 8),
        (ApiKey.INIT_PRODUCER_ID, 4),
        (ApiKey.ADD_PARTITIONS_TO_TXN, 0),
        (ApiKey.END_TXN, 1),
        (ApiKey.API_VERSIONS, 3),
    } <= EXPECTED["librdkafka"]
    assert {
        (ApiKey.PRODUCE, 9),
        (ApiKey.FETCH, 12),
        (ApiKey.FIND_COORDINATOR, 4),
        (ApiKey.API_VERSIONS, 4),
        (ApiKey.ADD_PARTITIONS_TO_TXN, 3),
    } <= EXPECTED["kafka-python"]
    assert {
        (ApiKey.PRODUCE, 7),
        (ApiKey.METADATA, 5),
        (ApiKey.API_VERSIONS, 0),
        (ApiKey.FETCH, 11),
        (ApiKey.TXN_OFFSET_COMMIT, 0),
    } <= EXPECTED["aiokafka"]
    assert set(EXPECTED) == set(SCENARIOS)


def assert_reencodes(client: str, raw: bytes) -> None:
    """Our decode → encode gives `raw` back byte for byte (but for librdkafka's quirk, module docstring)."""
    header, body = decode_request(raw)
    again = reencode(raw)
    if again == raw:
        return
    where = f"{client} {ApiKey(header.api_key).name} v{header.api_version}"
    assert client == "librdkafka", f"{where}: re-encodes to {again.hex()}, sent {raw.hex()}"
    assert header.api_key == ApiKey.METADATA, where
    assert API_SPECS[header.api_key].request_is_flexible(header.api_version), where
    assert body.topics is None, where
    assert raw == again + LIBRDKAFKA_ALL_TOPICS_TAIL, f"{where}: {raw.hex()} vs {again.hex()}"


# --- live --------------------------------------------------------------------------------------------------


@pytest.mark.interop
@pytest.mark.timeout(40)
@pytest.mark.parametrize("client", sorted(SCENARIOS))
def test_live_client_frames(client: str) -> None:
    started = time.monotonic()
    frames = capture(client)
    assert time.monotonic() - started < 20

    assert [(f.api_name, f.api_version, f.error) for f in frames if f.error is not None] == []
    seen = {(f.api_key, f.api_version) for f in frames}
    assert _named(seen) == _named(EXPECTED[client])
    for f in frames:
        assert f.client == client
        assert_reencodes(client, f.raw)


def _named(pairs: set[tuple[int, int]]) -> list[str]:
    return sorted(f"{ApiKey(key).name} v{version}" for key, version in pairs)


def test_helper_answers_unsupported_api_versions_with_a_v0_error_body() -> None:
    # ApiVersions v9 (flexible header v2 - its fields past client_id are never read): Kafka's answer.
    request = struct.pack(">hhih", ApiKey.API_VERSIONS, 9, 42, 1) + b"x" + b"\x00" + b"\x02a\x021\x00"
    with GoldenServer("raw") as server, socket.create_connection(("127.0.0.1", server.port), 5) as conn:
        conn.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", _read(conn, 4))[0]
        correlation_id, body = decode_response(ApiKey.API_VERSIONS, 0, _read(conn, size))
    assert correlation_id == 42
    assert body.error_code == UNSUPPORTED_VERSION
    assert {(k.api_key, k.min_version, k.max_version) for k in body.api_keys} == {
        (key, lo, hi) for key, (lo, hi) in ADVERTISED.items()
    }
    assert [(f.api_key, f.api_version, f.error is not None) for f in server.captured()] == [(18, 9, True)]


def _read(conn: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return buf


# --- offline -----------------------------------------------------------------------------------------------

GOLDEN_FILES = sorted(GOLDEN_DIR.glob("*/*.bin"))


def _parse_name(path: Path) -> tuple[str, str, int, int]:
    """<client>/<api>_v<version>_<n>.bin → (client, api, version, n)."""
    stem, n = path.stem.rsplit("_", 1)
    api, version = stem.rsplit("_v", 1)
    return path.parent.name, api, int(version), int(n)


def test_golden_files_cover_every_expected_version() -> None:
    assert sum(p.stat().st_size for p in GOLDEN_FILES) < 200_000
    found: dict[str, set[tuple[int, int]]] = {}
    per_kind: dict[tuple[str, str, int], int] = {}
    for path in GOLDEN_FILES:
        client, api, version, _ = _parse_name(path)
        found.setdefault(client, set()).add((ApiKey[api.upper()], version))
        per_kind[(client, api, version)] = per_kind.get((client, api, version), 0) + 1
    assert {c: _named(pairs) for c, pairs in found.items()} == {c: _named(p) for c, p in EXPECTED.items()}
    assert max(per_kind.values()) <= 2


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=[f"{p.parent.name}/{p.stem}" for p in GOLDEN_FILES])
def test_golden_frame_decodes_and_reencodes(path: Path) -> None:
    client, api, version, _ = _parse_name(path)
    raw = path.read_bytes()
    header, body = decode_request(raw)
    assert (ApiKey(header.api_key).name.lower(), header.api_version) == (api, version)
    assert type(body).__name__.endswith("Request")
    assert_reencodes(client, raw)


def test_golden_librdkafka_all_topics_metadata_is_kept() -> None:
    # The one irregular frame must stay among the saved ones (golden.select keeps it first).
    irregular: list[Any] = []
    for path in GOLDEN_DIR.glob("librdkafka/metadata_v*.bin"):
        raw = path.read_bytes()
        if reencode(raw) != raw:
            irregular.append(decode_request(raw)[1])
    assert len(irregular) == 1
    assert irregular[0].topics is None
