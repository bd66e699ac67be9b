"""Arrow record batches to confluent-kafka records (`exactly.spark.writer.kafka_records`), no Spark."""

from __future__ import annotations

import pickle
from pathlib import Path

import pyarrow as pa

from exactly.spark.preflight import ColumnLayout
from exactly.spark.writer import ExactlyCommitMessage, _checkpoint_query_id, kafka_records


def test_columns_map_onto_records_and_nulls_are_left_out() -> None:
    headers_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    batch = pa.record_batch(
        [
            pa.array([b"k0", None, b"k2"], pa.binary()),
            pa.array([b"v0", b"v1", None], pa.binary()),
            pa.array(["t", None, "u"]),
            pa.array([2, None, 0], pa.int32()),
            pa.array([[{"key": "a", "value": b"1"}, {"key": "b", "value": None}], None, []], headers_type),
            pa.array([7, 8, 9]),
        ],
        names=["key", "Value", "topic", "partition", "headers", "ignored"],
    )
    empty = batch.slice(0, 0)
    layout = ColumnLayout(value="Value", key="key", topic="topic", partition="partition", headers="headers")
    assert list(kafka_records(iter([empty, batch]), layout)) == [
        {"value": b"v0", "key": b"k0", "topic": "t", "partition": 2, "headers": [("a", b"1"), ("b", None)]},
        {"value": b"v1"},
        {"value": None, "key": b"k2", "topic": "u", "partition": 0, "headers": []},
    ]


def test_commit_message_pickles() -> None:
    message = ExactlyCommitMessage("q", 3, 1, 0, "exactly-spark.q.3.1.abc", 10)
    assert pickle.loads(pickle.dumps(message)) == message


def test_query_id_from_a_local_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "metadata").write_text('{"id":"4f1c0b6e-query"}\n')
    assert _checkpoint_query_id(str(tmp_path)) == "4f1c0b6e-query"
    assert _checkpoint_query_id(f"file:{tmp_path}") == "4f1c0b6e-query"
    assert _checkpoint_query_id(str(tmp_path / "missing")) is None
    assert _checkpoint_query_id(None) is None
