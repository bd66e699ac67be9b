"""Metadata responses for many partitions: each topic's encoding is cached, not rebuilt per request.

A Metadata response for 100,000 partitions is 100,000 partition structs; building them as objects and
encoding them took ~7 s. The partitions of a topic on this single node differ only by their index, so a
topic's encoded bytes depend only on (version, node, name, id, internal, partition count, authorized
operations): they are encoded once, with the generated encoders, and cached under that key.

A response is then spliced: the generated encoder writes the response with no topics, whose last two
chunks are, from v9 (flexible versions, `SPLICED_FROM_VERSION`), the topics array's compact length and
what follows the array (tagged fields, an error code, cluster operations); the cached topic encodings go
in between, after the real array length. `_split` checks that shape on every encoding it makes (a
generated encoder that did otherwise fails loudly, not silently). Older versions are encoded as usual.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from exactly.protocol import primitives as p
from exactly.protocol.api import EncodedBody, response_body_chunks
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.metadata import MetadataResponse, MetadataResponseTopic

SPLICED_FROM_VERSION = 9
_MAX_CACHED = 400_000  # topic encodings kept (cleared beyond: a cache, not a leak)
_MAX_FRAMES = 1_000  # encodings of what surrounds the topics, likewise
_EMPTY = p.compact_array_len(0)


class MetadataEncodings:
    def __init__(self) -> None:
        self._topics: dict[tuple[int, Hashable], bytes] = {}
        # what surrounds the topics (brokers, cluster id, controller, ...) changes rarely: encoded once
        # per value, (head joined into one chunk that starts with throttle_time_ms, tail)
        self._frames: dict[Hashable, tuple[bytes, bytes]] = {}

    def encode(
        self,
        version: int,
        response: MetadataResponse,
        topics: list[tuple[Hashable | None, Callable[[], MetadataResponseTopic]]],
    ) -> EncodedBody:
        """`response` (its `topics` ignored) with `topics`: (cache key or None, builder) each."""
        response.topics = []
        frame_key = (
            version,
            response.throttle_time_ms,
            tuple((b.node_id, b.host, b.port, b.rack) for b in response.brokers),
            response.cluster_id,
            response.controller_id,
            response.cluster_authorized_operations,
            response.error_code,
        )
        frame = self._frames.get(frame_key)
        if frame is None:
            if len(self._frames) >= _MAX_FRAMES:
                self._frames.clear()
            chunks_, tail_ = _split(response_body_chunks(ApiKey.METADATA, version, response))
            frame = self._frames[frame_key] = (b"".join(chunks_), tail_)
        head, tail = frame
        chunks: list[p.Chunk] = [head, p.compact_array_len(len(topics))]
        for key, build in topics:
            chunks.append(self._topic(version, key, build))
        chunks.append(tail)
        return EncodedBody(chunks)

    def _topic(self, version: int, key: Hashable | None, build: Callable[[], MetadataResponseTopic]) -> bytes:
        if key is None:
            return encode_topic(version, build())
        found = self._topics.get((version, key))
        if found is None:
            if len(self._topics) >= _MAX_CACHED:
                self._topics.clear()
            found = self._topics[(version, key)] = encode_topic(version, build())
        return found


def encode_topic(version: int, topic: MetadataResponseTopic) -> bytes:
    """One topic's bytes inside a Metadata response of `version`."""
    shell = MetadataResponse(brokers=[], cluster_id=None, controller_id=-1, topics=[])
    empty = response_body_chunks(ApiKey.METADATA, version, shell)
    shell.topics = [topic]
    full = response_body_chunks(ApiKey.METADATA, version, shell)
    head, tail = _split(empty)
    if full[: len(head)] != head or full[-1] != tail:
        raise AssertionError(f"Metadata v{version}: a topic's encoding is not where it was expected")
    return b"".join(full[len(head) + 1 : -1])


def _split(chunks: list[p.Chunk]) -> tuple[list[p.Chunk], bytes]:
    """(chunks before the topics array, the chunk after it) of a response with no topics."""
    count, tail = bytes(chunks[-2]), bytes(chunks[-1])
    if count != _EMPTY:
        raise AssertionError(f"Metadata response: no topics array length before the last chunk: {count!r}")
    return chunks[:-2], tail
