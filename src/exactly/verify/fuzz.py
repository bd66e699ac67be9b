"""Bad-input fuzzing of a running broker (frames) and of its loader (files on disk).

Frames: valid requests encoded by our codecs (ApiVersions, Metadata, Produce with a real record batch,
ListOffsets, Fetch, FindCoordinator, InitProducerId) are mutated - bits flipped in the body, the body cut
short (length prefix fixed), garbage spliced in, a random api version or api key - and each is sent on a
fresh connection. Expected: an answer or the connection closed (a Produce may also stay silent: acks=0 is
one bit away). A case the broker leaves hanging, or a broker that dies, is a mismatch. Mutated Produce
requests go to the topic `fuzz`; meanwhile a healthy confluent-kafka producer writes a numbered sequence to
`healthy` and must read it back exactly, and every batch stored in `fuzz` must still carry a valid CRC (the
broker never stores a corrupt batch, whatever it was sent).

Files: `damage_file` flips bytes in, cuts, or appends garbage to one file of a stopped broker's data
directory; the broker must then either start and serve a prefix of each partition's original records
(never a corrupt or invented one), or refuse to start with a one-line reason (no traceback).
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exactly.protocol.api import encode_request
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.protocol.messages.find_coordinator import FindCoordinatorRequest
from exactly.protocol.messages.init_producer_id import InitProducerIdRequest
from exactly.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from exactly.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from exactly.records.builder import build_batch

FUZZ_TOPIC = "fuzz"
HEALTHY_TOPIC = "healthy"
MUTATIONS = ("bitflip", "truncate", "splice", "version", "api-key", "length-short")


@dataclass(frozen=True, slots=True)
class Case:
    request: str
    mutation: str
    outcome: str  # response | closed | silent

    @property
    def expected(self) -> bool:
        allowed = {"response", "closed"}
        if self.request == "Produce":
            allowed.add("silent")  # acks=0 is one flipped bit away
        return self.outcome in allowed


@dataclass(slots=True)
class FuzzResult:
    cases: list[Case] = field(default_factory=list)
    healthy_written: int = 0
    healthy_read: list[int] = field(default_factory=list)
    healthy_errors: list[str] = field(default_factory=list)

    @property
    def outcomes(self) -> Counter[str]:
        return Counter(f"{c.request}/{c.mutation}/{c.outcome}" for c in self.cases)

    @property
    def mismatches(self) -> list[Case]:
        return [c for c in self.cases if not c.expected]


def seed_requests() -> list[tuple[str, bytes]]:
    """Valid request frames, one per API the fuzzer starts from."""
    batch = build_batch([(b"k", b"v" * 40), (None, b"w" * 10)], timestamp=1_700_000_000_000)
    produce = ProduceRequest(
        None, -1, 5000, [TopicProduceData(FUZZ_TOPIC, partition_data=[PartitionProduceData(0, batch)])]
    )
    bodies: list[tuple[str, int, int, Any]] = [
        ("ApiVersions", ApiKey.API_VERSIONS, 3, ApiVersionsRequest("fuzz", "1.0")),
        ("Metadata", ApiKey.METADATA, 12, MetadataRequest([MetadataRequestTopic(name=FUZZ_TOPIC)], False)),
        ("Produce", ApiKey.PRODUCE, 9, produce),
        ("Produce", ApiKey.PRODUCE, 3, produce),
        (
            "ListOffsets",
            ApiKey.LIST_OFFSETS,
            7,
            ListOffsetsRequest(-1, 1, [ListOffsetsTopic(FUZZ_TOPIC, [ListOffsetsPartition(0, -1, -1)])]),
        ),
        ("FindCoordinator", ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest("fuzz-group", 0)),
        ("InitProducerId", ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(None, 60000, -1, -1)),
    ]
    return [(name, encode_request(key, version, 7, "fuzzer", body)) for name, key, version, body in bodies]


def mutate(frame: bytes, mutation: str, rng: random.Random) -> bytes:
    """`frame` (with its size prefix) changed by `mutation`; the size prefix matches the new body except for
    `length-short`, which claims fewer bytes than follow."""
    body = bytearray(frame[4:])
    if mutation == "bitflip":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(body))
            body[i] ^= 1 << rng.randrange(8)
    elif mutation == "truncate":
        del body[rng.randint(1, len(body) - 1) :]
    elif mutation == "splice":
        i = rng.randrange(len(body))
        body[i:i] = rng.randbytes(rng.randint(1, 32))
    elif mutation == "version":
        struct.pack_into(">h", body, 2, rng.randint(-32768, 32767))
    elif mutation == "api-key":
        struct.pack_into(">h", body, 0, rng.choice([rng.randint(-32768, 32767), rng.randint(70, 9999)]))
    elif mutation == "length-short":
        return struct.pack(">i", rng.randint(0, len(body) - 1)) + bytes(body)
    return struct.pack(">i", len(body)) + bytes(body)


def send_case(address: tuple[str, int], frame: bytes, wait: float = 3.0) -> str:
    """`response` when a whole frame came back, `closed` when the broker closed the connection, `silent`
    when neither happened within `wait` seconds."""
    with socket.create_connection(address, timeout=wait) as s:
        try:
            s.sendall(frame)
            data = b""
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                chunk = s.recv(1 << 16)
                if not chunk:
                    return "closed"
                data += chunk
                if len(data) >= 4 and len(data) >= 4 + struct.unpack_from(">i", data)[0]:
                    return "response"
        except (ConnectionResetError, BrokenPipeError):
            return "closed"
        except TimeoutError:
            return "silent"
    return "silent"


def _healthy_client(bootstrap: str, stop: threading.Event, result: FuzzResult) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2})
    try:
        n = 0
        while not stop.is_set():
            for _ in range(20):
                producer.produce(HEALTHY_TOPIC, str(n).encode(), partition=0)
                n += 1
            if producer.flush(20):
                result.healthy_errors.append("a healthy flush did not finish in 20 s")
                return
            result.healthy_written = n
            time.sleep(0.05)
    except KafkaException as e:
        result.healthy_errors.append(str(e))
        return
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "fuzz-healthy", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(HEALTHY_TOPIC, 0, 0)])
    deadline = time.monotonic() + 30
    while len(result.healthy_read) < result.healthy_written and time.monotonic() < deadline:
        for msg in consumer.consume(500, 0.5):
            if msg.error() is None:
                result.healthy_read.append(int(msg.value() or b"-1"))
    consumer.close()


def run_frame_fuzz(bootstrap: str, seconds: float, seed: int) -> FuzzResult:
    """Mutated frames for `seconds` against the broker at `bootstrap` (topics `fuzz` and `healthy` exist),
    with the healthy client running meanwhile."""
    host, port = bootstrap.rsplit(":", 1)
    address = (host, int(port))
    rng = random.Random(seed)
    seeds = seed_requests()
    result = FuzzResult()
    stop = threading.Event()
    healthy = threading.Thread(target=_healthy_client, args=(bootstrap, stop, result), daemon=True)
    healthy.start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        name, frame = rng.choice(seeds)
        mutation = rng.choice(MUTATIONS)
        outcome = send_case(address, mutate(frame, mutation, rng))
        result.cases.append(Case(name, mutation, outcome))
    stop.set()
    healthy.join(90)
    return result


DAMAGES = ("flip", "cut", "garbage")


def damage_file(path: Path, rng: random.Random) -> str:
    """Flip 1-16 bytes of, cut, or append garbage to `path`; says what it did."""
    data = bytearray(path.read_bytes())
    kind = rng.choice(DAMAGES) if data else "garbage"
    if kind == "flip":
        for _ in range(rng.randint(1, 16)):
            data[rng.randrange(len(data))] ^= rng.randint(1, 255)
    elif kind == "cut":
        del data[rng.randrange(len(data)) :]
    else:
        data += rng.randbytes(rng.randint(1, 200))
    path.write_bytes(bytes(data))
    return kind
