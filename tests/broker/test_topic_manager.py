"""TopicManager at start-up: the logs made to match the metadata log (`sync_logs_with_metadata`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from exactly.cluster.metadata import FILE_NAME, CorruptMetadataError
from tests.broker.parts import build_parts
from tests.storage.helpers import data_batch


def _metadata_lines(data_dir: Path) -> list[bytes]:
    return (data_dir / FILE_NAME).read_bytes().splitlines(keepends=True)


def test_logs_of_a_create_that_never_landed_are_removed(tmp_path: Path) -> None:
    async def run() -> None:
        parts = build_parts(tmp_path)
        await parts.topics.create_topic("kept", 1, {})
        await parts.topics.create_topic("undone", 2, {})
        lines = _metadata_lines(tmp_path)
        await parts.close()
        (tmp_path / FILE_NAME).write_bytes(b"".join(lines[:-1]))  # the create's record never landed
        again = build_parts(tmp_path)
        assert sorted(again.logs.partitions()) == [("kept", 0)]
        assert not (tmp_path / "undone-0").exists()
        await again.close()

    asyncio.run(run())


def test_logs_holding_data_of_a_topic_the_metadata_lost_stop_the_start_and_stay(tmp_path: Path) -> None:
    async def run() -> None:
        parts = build_parts(tmp_path)
        await parts.topics.create_topic("kept", 1, {})
        await parts.topics.create_topic("lost", 2, {})
        lines = _metadata_lines(tmp_path)
        partition = parts.replicas.online_partition("lost", 1)
        parts.replicas.append_records(partition, data_batch(3, value=b"precious"))
        await parts.close()
        (tmp_path / FILE_NAME).write_bytes(b"".join(lines[:-1]))  # damage: the topic's record is cut off
        with pytest.raises(
            CorruptMetadataError, match=r"no record creates lost, whose logs hold data \(lost-0, lost-1\)"
        ):
            build_parts(tmp_path)
        assert (tmp_path / "lost-1").is_dir()
        assert (tmp_path / "lost-0").is_dir()
        assert any(f.stat().st_size > 0 for f in (tmp_path / "lost-1").glob("*.log"))

    asyncio.run(run())


def test_logs_of_a_deleted_topic_left_by_a_crash_are_removed_even_with_data(tmp_path: Path) -> None:
    async def run() -> None:
        parts = build_parts(tmp_path)
        await parts.topics.create_topic("gone", 1, {})
        parts.replicas.append_records(parts.replicas.online_partition("gone", 0), data_batch(2, value=b"old"))
        parts.metadata.delete_topic("gone")  # the record landed; the crash came before the logs went
        await parts.close()
        again = build_parts(tmp_path)
        assert again.logs.partitions() == []
        assert not (tmp_path / "gone-0").exists()
        await again.close()

    asyncio.run(run())
