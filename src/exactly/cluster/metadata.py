"""Cluster metadata: topics, their ids, partition counts and config overrides, kept in a log.

On disk (`<data_dir>/__cluster_metadata.log`), one record per line, appended and fsynced before the
change takes effect (ARCHITECTURE invariants 2 and 7):

    <crc32c of the JSON text, 8 hex digits> <JSON object>\\n

    {"op": "create", "topic": "t", "id": "<uuid hex>", "partitions": 3, "configs": {"k": "v"}}
    {"op": "partitions", "topic": "t", "partitions": 6}
    {"op": "configs", "topic": "t", "configs": {"k": "v"}}        (the complete override set)
    {"op": "delete", "topic": "t"}
    {"op": "producer_ids", "next": 2000}                           (ids below `next` are handed out)
    {"op": "broker_configs", "resource": "", "configs": {"k": "v"}}
        run-time broker configs (the complete set) of the cluster default (resource "") or of one broker
        (its id); DescribeConfigs calls them DYNAMIC_DEFAULT_BROKER_CONFIG / DYNAMIC_BROKER_CONFIG
    {"op": "client_quotas", "entity": [["client-id", "c"], ["user", null]],
     "values": {"producer_byte_rate": 1024.0, "consumer_byte_rate": null}}
                      (an entity's changed quota values, null removes one; type order; null name = default)
    {"op": "acls_create", "acls": [<binding>, ...]}                (exactly.security.acls: AclBinding.to_json)
    {"op": "acls_delete", "acls": [<binding>, ...]}
        ACL bindings created or deleted by one CreateAcls / DeleteAcls request, all or nothing
    {"op": "scram", "user": "alice", "mechanism": "SCRAM-SHA-256", "salt": "<hex>", "iterations": 8192,
     "stored_key": "<hex>", "server_key": "<hex>"}
        a user's SCRAM credential (Kafka's UserScramCredentialRecord: salted and hashed, never the password)
    {"op": "scram_delete", "user": "alice", "mechanism": "SCRAM-SHA-256"}   (RemoveUserScramCredentialRecord)

An append that fails (ENOSPC, EFBIG, EIO: a short write or a failed fsync) is cut off again before the
error is raised, so a change is on disk and in memory, or in neither.

Loading replays the lines in order. A torn or corrupt *last* line (a crash mid-append) is cut off; a
corrupt line followed by valid ones means the file was damaged, and loading refuses to guess.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import crc32c

from exactly.errors import ErrorCode, ExactlyError, KafkaError
from exactly.quotas.entities import QuotaEntity
from exactly.security.acls import AclBinding
from exactly.storage import files

FILE_NAME = "__cluster_metadata.log"
MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


class CorruptMetadataError(ExactlyError):
    pass


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name.startswith("__")


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What SCRAM needs to check a client's proof (RFC 5802 §3): never the password."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def validate_topic_name(name: str) -> None:
    """Kafka's `Topic.validate`: INVALID_TOPIC_EXCEPTION for empty, '.', '..', too long, illegal chars."""
    if not name or name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name {name!r} is illegal")
    if len(name) > MAX_TOPIC_NAME:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name longer than {MAX_TOPIC_NAME} characters"
        )
    if not _LEGAL.match(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} contains characters other than ASCII alphanumerics, '.', '_' and '-'",
        )


class ClusterMetadata:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE_NAME
        self.topics: dict[str, TopicInfo] = {}
        self.ever_created: set[str] = set()  # every topic a create record names, deleted ones too
        self.next_producer_id_block = 0
        self.broker_configs: dict[str, dict[str, str]] = {}  # resource name ("" or a broker id) -> set
        self.client_quotas: dict[QuotaEntity, dict[str, float]] = {}
        self.acls: set[AclBinding] = set()
        self.scram_credentials: dict[tuple[str, str], ScramCredential] = {}  # (user, mechanism) -> it
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self.end_offset = 0  # records in the log: its offset as DescribeQuorum reports it
        data_dir.mkdir(parents=True, exist_ok=True)
        self._load()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def close(self) -> None:
        os.close(self._fd)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    # --- a cluster's topics live in ZooKeeper: this broker's view of them, in memory only -------------

    def mirror_topic(self, info: TopicInfo) -> None:
        """A topic as ZooKeeper has it (exactly.broker.cluster_member), not written to the local log."""
        old = self.topics.get(info.name)
        if old is not None and old.topic_id != info.topic_id:
            self._by_id.pop(old.topic_id, None)
        self.topics[info.name] = info
        self._by_id[info.topic_id] = info

    def forget_local_topics(self) -> None:
        """Drop the topics read from the local log (a broker that joins a cluster takes ZooKeeper's)."""
        self.topics.clear()
        self._by_id.clear()

    def forget_topic(self, name: str) -> None:
        info = self.topics.pop(name, None)
        if info is not None:
            self._by_id.pop(info.topic_id, None)

    # --- changes: append, then apply -------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> TopicInfo:
        self.check_new_topic(name, partitions)
        record = {"op": "create", "topic": name, "id": uuid.uuid4().hex, "partitions": partitions}
        record["configs"] = dict(configs or {})
        self._append(record)
        return self.topics[name]

    def check_new_topic(self, name: str, partitions: int) -> None:
        """Raise the KafkaError `create_topic` would, without creating anything."""
        validate_topic_name(name)
        if name in self.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        collision = next((t for t in self.topics if _metric_name(t) == _metric_name(name)), None)
        if collision is not None:
            raise KafkaError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"topic {name!r} collides with existing topic {collision!r}",
            )
        if partitions < 1:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "number of partitions must be at least 1")

    def add_partitions(self, name: str, total: int) -> TopicInfo:
        self.check_add_partitions(name, total)
        self._append({"op": "partitions", "topic": name, "partitions": total})
        return self.topics[name]

    def check_add_partitions(self, name: str, total: int) -> TopicInfo:
        """The topic as it is; raises the KafkaError `add_partitions` would, without changing anything."""
        topic = self._get(name)
        if total <= topic.partitions:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic {name!r} has {topic.partitions} partitions; the new count {total} must be larger",
            )
        return topic

    def set_configs(self, name: str, configs: dict[str, str]) -> TopicInfo:
        self._get(name)
        self._append({"op": "configs", "topic": name, "configs": dict(configs)})
        return self.topics[name]

    def delete_topic(self, name: str) -> TopicInfo:
        topic = self._get(name)
        self._append({"op": "delete", "topic": name})
        return topic

    def set_broker_configs(self, resource: str, configs: dict[str, str]) -> None:
        """Replace the run-time configs of broker `resource` ("" = the cluster-wide default)."""
        self._append({"op": "broker_configs", "resource": resource, "configs": dict(configs)})

    def reserve_producer_ids(self, count: int) -> range:
        """Durably reserve the next `count` producer ids: never handed out again, even after a crash."""
        start = self.next_producer_id_block
        self._append({"op": "producer_ids", "next": start + count})
        return range(start, start + count)

    def alter_client_quotas(self, entity: QuotaEntity, changes: dict[str, float | None]) -> None:
        """Set `entity`'s quota values (None removes one); only actual changes are appended, in one record.
        An entity left without values is forgotten (as Kafka's ClientQuotasImage)."""
        current = self.client_quotas.get(entity, {})
        effective = {
            key: value
            for key, value in changes.items()
            if (key in current if value is None else current.get(key) != value)
        }
        if effective:
            self._append(
                {"op": "client_quotas", "entity": [list(pair) for pair in entity], "values": effective}
            )

    def create_acls(self, acls: list[AclBinding]) -> list[AclBinding]:
        """Durably add the bindings not already present (in one record); returns those added."""
        new = list(dict.fromkeys(acl for acl in acls if acl not in self.acls))
        if new:
            self._append({"op": "acls_create", "acls": [acl.to_json() for acl in new]})
        return new

    def delete_acls(self, acls: list[AclBinding]) -> list[AclBinding]:
        """Durably remove the bindings present (in one record); returns those removed."""
        gone = list(dict.fromkeys(acl for acl in acls if acl in self.acls))
        if gone:
            self._append({"op": "acls_delete", "acls": [acl.to_json() for acl in gone]})
        return gone

    def set_scram_credential(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        self._append(
            {
                "op": "scram",
                "user": user,
                "mechanism": mechanism,
                "salt": credential.salt.hex(),
                "iterations": credential.iterations,
                "stored_key": credential.stored_key.hex(),
                "server_key": credential.server_key.hex(),
            }
        )

    def delete_scram_credential(self, user: str, mechanism: str) -> None:
        self._append({"op": "scram_delete", "user": user, "mechanism": mechanism})

    def _get(self, name: str) -> TopicInfo:
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        return topic

    def _append(self, record: dict[str, Any]) -> None:
        text = json.dumps(record, sort_keys=True, separators=(",", ":"))
        line = f"{crc32c.crc32c(text.encode()):08x} {text}\n".encode()
        length = os.fstat(self._fd).st_size
        try:
            written = 0
            while written < len(line):  # a short write (a full disk) leaves part of the line
                written += os.write(self._fd, line[written:])
            files.fsync(self._fd, self.path)
        except OSError:
            # All or nothing: cut off what was written, so the change takes no effect (and no torn line is
            # followed by later records, which loading would refuse as damage); the caller sees the error.
            try:
                os.ftruncate(self._fd, length)
                files.note_length(self.path, length)
            except OSError:
                pass  # the torn last line is cut off at the next load
            raise
        self._apply(record)
        self.end_offset += 1

    def _apply(self, record: dict[str, Any]) -> None:
        op = record["op"]
        if op == "producer_ids":
            self.next_producer_id_block = int(record["next"])
            return
        if op == "broker_configs":
            configs = {str(k): str(v) for k, v in record["configs"].items()}
            if configs:
                self.broker_configs[str(record["resource"])] = configs
            else:
                self.broker_configs.pop(str(record["resource"]), None)
            return
        if op == "client_quotas":
            self._apply_client_quotas(record)
            return
        if op in ("acls_create", "acls_delete"):
            bindings = [AclBinding.from_json(item) for item in record["acls"]]
            if op == "acls_create":
                self.acls.update(bindings)
            else:
                self.acls.difference_update(bindings)
            return
        if op == "scram":
            self.scram_credentials[(str(record["user"]), str(record["mechanism"]))] = ScramCredential(
                bytes.fromhex(record["salt"]),
                int(record["iterations"]),
                bytes.fromhex(record["stored_key"]),
                bytes.fromhex(record["server_key"]),
            )
            return
        if op == "scram_delete":
            self.scram_credentials.pop((str(record["user"]), str(record["mechanism"])), None)
            return
        name = record["topic"]
        if op == "create":
            topic = TopicInfo(name, uuid.UUID(hex=record["id"]), int(record["partitions"]), record["configs"])
            self.ever_created.add(name)
        elif op == "delete":
            old = self.topics.pop(name)
            del self._by_id[old.topic_id]
            return
        else:
            old = self.topics[name]
            if op == "partitions":
                topic = TopicInfo(name, old.topic_id, int(record["partitions"]), old.configs)
            elif op == "configs":
                topic = TopicInfo(name, old.topic_id, old.partitions, record["configs"])
            else:
                raise CorruptMetadataError(f"unknown metadata record {op!r}")
        self.topics[name] = topic
        self._by_id[topic.topic_id] = topic

    def _apply_client_quotas(self, record: dict[str, Any]) -> None:
        entity: QuotaEntity = tuple((str(t), None if n is None else str(n)) for t, n in record["entity"])
        values = dict(self.client_quotas.get(entity, {}))
        for key, value in record["values"].items():
            if value is None:
                values.pop(key, None)
            else:
                values[key] = float(value)
        if values:
            self.client_quotas[entity] = values
        else:
            self.client_quotas.pop(entity, None)

    def _load(self) -> None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        good = 0
        lines = raw.split(b"\n")
        for i, line in enumerate(lines):
            if not line:
                if i == len(lines) - 1:
                    break
                raise CorruptMetadataError(f"{self.path}: empty line {i + 1}")
            record = _parse(line)
            if record is None or i == len(lines) - 1:  # corrupt, or no trailing newline: torn write
                if any(lines[i + 1 :]):
                    raise CorruptMetadataError(f"{self.path}: line {i + 1} is corrupt and not the last one")
                break
            try:
                self._apply(record)
            except (KeyError, ValueError, TypeError) as e:
                raise CorruptMetadataError(f"{self.path}: line {i + 1} cannot be applied: {e}") from None
            self.end_offset += 1
            good += len(line) + 1
        if good != len(raw):
            with open(self.path, "r+b") as f:
                f.truncate(good)
                files.note_length(self.path, good)
                files.fsync(f.fileno(), self.path)


def _metric_name(topic: str) -> str:
    """Kafka refuses topics whose names differ only in '.' versus '_' (they share metric names)."""
    return topic.replace(".", "_")


def _parse(line: bytes) -> dict[str, Any] | None:
    crc, sep, text = line.partition(b" ")
    if not sep or len(crc) != 8:
        return None
    try:
        if int(crc, 16) != crc32c.crc32c(text):
            return None
        record = json.loads(text)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None
