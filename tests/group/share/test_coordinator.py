"""The share coordinator's shard: its five operations' checks (fencing by leader and state epoch), the
records they return (updates between snapshots, a snapshot every `snapshot_every` updates), and that
replaying its log rebuilds the same states (a state partition's new leader loads it)."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from exactly.errors import ErrorCode
from exactly.group.share.coordinator import Outcome, Record, ShareCoordinatorShard, StateWrite
from exactly.group.share.partition import RecordState, ShareState, StateBatch
from exactly.group.share.records import SNAPSHOT, UPDATE, SharePartitionKey, decode_key

KEY = SharePartitionKey("g", uuid.UUID(int=7), 0)
A, K = RecordState.AVAILABLE, RecordState.ACKNOWLEDGED


def _apply(shard: ShareCoordinatorShard, outcome: Outcome, log: list[Record] | None = None) -> Outcome:
    for key, value in outcome.records:
        shard.replay(key, value)
        if log is not None:
            log.append((key, value))
    return outcome


def _kinds(outcome: Outcome) -> list[int]:
    return [decode_key(k)[0] for k, _ in outcome.records]


def test_initialize_read_write_and_fencing() -> None:
    shard = ShareCoordinatorShard(snapshot_every=500)
    assert shard.read(KEY, 3) == Outcome(ErrorCode.NONE)  # no state yet
    assert shard.write(KEY, StateWrite(0, 3, 5), 1).code == ErrorCode.INVALID_REQUEST
    assert _kinds(_apply(shard, shard.initialize(KEY, 0, 5, 1))) == [SNAPSHOT]
    assert shard.initialize(KEY, 0, 9, 2).code == ErrorCode.FENCED_STATE_EPOCH

    # a leader of epoch 3 reads: the epoch is recorded (an update), an older leader is fenced from now on
    read = _apply(shard, shard.read(KEY, 3))
    assert read.state is not None
    assert read.state.state.start_offset == 5
    assert _kinds(read) == [UPDATE]
    assert shard.read(KEY, 2).code == ErrorCode.FENCED_LEADER_EPOCH
    assert shard.write(KEY, StateWrite(0, 2, 6), 3).code == ErrorCode.FENCED_LEADER_EPOCH
    assert shard.read(KEY, 3).records == ()  # the same epoch again: nothing to record

    write = _apply(
        shard, shard.write(KEY, StateWrite(0, 3, 6, (StateBatch(6, 8, K, 1), StateBatch(9, 9, A, 2))), 4)
    )
    assert _kinds(write) == [UPDATE]
    stored = shard.get(KEY)
    assert stored is not None
    assert stored.state == ShareState(6, (StateBatch(6, 8, K, 1), StateBatch(9, 9, A, 2)))
    assert stored.leader_epoch == 3
    assert stored.state_epoch == 0

    # AlterShareGroupOffsets: a new state epoch; the data leader's writes under the old one are fenced
    _apply(shard, shard.initialize(KEY, 1, 100, 5))
    assert shard.write(KEY, StateWrite(0, 3, 10), 6).code == ErrorCode.FENCED_STATE_EPOCH
    stored = shard.get(KEY)
    assert stored is not None
    assert stored.state == ShareState(100)
    assert stored.leader_epoch == 3
    summary = shard.summary(KEY, -1)
    assert summary.state is not None
    assert summary.state.state_epoch == 1
    assert summary.records == ()

    _apply(shard, shard.delete(KEY))
    assert shard.get(KEY) is None
    assert shard.delete(KEY).records == ()


def test_a_snapshot_follows_every_n_updates() -> None:
    shard = ShareCoordinatorShard(snapshot_every=3)
    _apply(shard, shard.initialize(KEY, 0, 0, 1))
    kinds = []
    for i in range(8):
        outcome = _apply(shard, shard.write(KEY, StateWrite(0, 0, i + 1, (StateBatch(i, i, K, 1),)), 10 + i))
        kinds += _kinds(outcome)
    assert kinds == [UPDATE, UPDATE, UPDATE, SNAPSHOT, UPDATE, UPDATE, UPDATE, SNAPSHOT]
    stored = shard.get(KEY)
    assert stored is not None
    assert stored.snapshot_epoch == 2
    assert stored.state.start_offset == 8
    assert stored.write_timestamp == 17
    assert stored.create_timestamp == 1
    # 0: snapshots only
    only = ShareCoordinatorShard(snapshot_every=0)
    _apply(only, only.initialize(KEY, 0, 0, 1))
    assert _kinds(only.write(KEY, StateWrite(0, 0, 1), 2)) == [SNAPSHOT]


operations = st.lists(
    st.one_of(
        st.tuples(st.just("init"), st.integers(0, 3), st.integers(0, 50)),
        st.tuples(st.just("read"), st.integers(-1, 5), st.just(0)),
        st.tuples(
            st.just("write"),
            st.integers(0, 5),
            st.integers(-1, 60),
            st.lists(
                st.tuples(st.integers(0, 60), st.integers(0, 5), st.sampled_from([A, K]), st.integers(1, 4)),
                max_size=4,
            ),
        ),
        st.tuples(st.just("delete"), st.just(0), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=60)
@given(operations, st.integers(0, 4))
def test_replaying_the_log_gives_the_same_states(ops: list[tuple], every: int) -> None:  # type: ignore[type-arg]
    shard = ShareCoordinatorShard(snapshot_every=every)
    log: list[Record] = []
    for now, op in enumerate(ops):
        if op[0] == "init":
            _apply(shard, shard.initialize(KEY, op[1], op[2], now), log)
        elif op[0] == "read":
            _apply(shard, shard.read(KEY, op[1]), log)
        elif op[0] == "write":
            stored = shard.get(KEY)
            state_epoch = stored.state_epoch if stored is not None else 0
            batches = tuple(StateBatch(f, f + n, s, c) for f, n, s, c in op[3])
            _apply(shard, shard.write(KEY, StateWrite(state_epoch, op[1], op[2], batches), now), log)
        else:
            _apply(shard, shard.delete(KEY), log)
    replayed = ShareCoordinatorShard(snapshot_every=every)
    for key, value in log:
        replayed.replay(key, value)
    assert replayed.states == shard.states
    stored = shard.get(KEY)
    if stored is not None:
        assert all(b.last_offset >= stored.state.start_offset for b in stored.state.batches)
