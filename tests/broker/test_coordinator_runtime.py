"""The coordinator runtime on its own: it loads what its partitions hold, appends as the partition's
leader with the records replayed before the durability wait, maps append failures to the codes a
coordinator's client sees, and refuses a partition it resigned until it leads it again."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from exactly.broker.coordinator_runtime import CoordinatorRuntime, append_error
from exactly.errors import ErrorCode, KafkaError
from exactly.records.batch import RecordBatch
from exactly.replication.partition import AppendResult
from tests.broker.parts import Parts, build_parts
from tests.storage.helpers import data_batch


@pytest.mark.parametrize(
    ("storage", "client"),
    [
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.UNKNOWN_SERVER_ERROR),
        (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.INVALID_PRODUCER_EPOCH),
    ],
)
def test_append_errors_as_kafkas_coordinators_answer_them(storage: ErrorCode, client: ErrorCode) -> None:
    assert append_error(storage) is client


def _runtime(parts: Parts, loaded: list[tuple[int, int]], unloaded: list[int]) -> CoordinatorRuntime:
    def load(partition: int, batches: Iterator[RecordBatch]) -> int:
        count = sum(b.records_count for b in batches)
        loaded.append((partition, count))
        return count

    return CoordinatorRuntime("__state", 2, 1 << 20, parts.replicas, parts.topics, load, unloaded.append)


def test_write_load_resign_and_lead_again(tmp_path: Path) -> None:
    async def run() -> None:
        parts = build_parts(tmp_path)
        loaded: list[tuple[int, int]] = []
        unloaded: list[int] = []
        runtime = _runtime(parts, loaded, unloaded)
        with pytest.raises(KafkaError) as missing:
            runtime.append(0, data_batch(1), "nothing yet")
        assert missing.value.code is ErrorCode.COORDINATOR_NOT_AVAILABLE  # the topic does not exist yet
        await runtime.ensure_topic()
        assert parts.topics.partitions("__state") == 2

        seen: list[tuple[int, int]] = []

        def replay(appended: AppendResult) -> None:
            # replayed before the wait: nothing is durable yet
            seen.append((appended.info.first_offset, appended.partition.log.recovery_point))

        written = await runtime.write(1, data_batch(3), "three records", replay=replay)
        assert seen == [(0, 0)]
        assert written.partition.log.recovery_point == 3  # durable when write returns

        runtime.resigned(1)
        assert unloaded == [1]
        with pytest.raises(KafkaError) as moved:
            await runtime.write(1, data_batch(1), "after resigning")
        assert moved.value.code is ErrorCode.NOT_COORDINATOR
        assert written.partition.log_end_offset == 3

        assert runtime.became_leader(1) == 3
        assert loaded == [(1, 3)]
        await runtime.write(1, data_batch(1), "leading again")
        assert runtime.load_all()[0] == 4
        assert loaded[-2:] == [(0, 0), (1, 4)]
        await parts.close()

    asyncio.run(run())


def test_a_partition_being_loaded_answers_load_in_progress_and_a_resigned_one_not_coordinator(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        parts = build_parts(tmp_path)
        seen: list[ErrorCode] = []

        def load(partition: int, batches: Iterator[RecordBatch]) -> int:
            try:
                runtime.check_owner(partition)
            except KafkaError as e:
                seen.append(e.code)
            assert runtime.loading
            return sum(1 for _ in batches)

        runtime = CoordinatorRuntime("__state", 1, 1 << 20, parts.replicas, parts.topics, load)
        await runtime.ensure_topic()
        runtime.became_leader(0)
        assert seen == [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
        assert not runtime.loading
        runtime.check_owner(0)  # loaded: served
        runtime.resigned(0)
        with pytest.raises(KafkaError) as moved:
            runtime.check_owner(0)
        assert moved.value.code is ErrorCode.NOT_COORDINATOR
        await parts.close()

    asyncio.run(run())
