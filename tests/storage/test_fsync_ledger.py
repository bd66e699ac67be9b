"""The fsync ledger (`exactly.debug.fsync.ledger`, storage/files.py): what it records and how the harness
replays it (exactly.verify.disk.read_ledger)."""

from __future__ import annotations

import os
from pathlib import Path

from exactly.storage import files
from exactly.verify.disk import read_ledger
from tests.interop.support import create_topic, running_broker
from tests.verify.disk_support import Produced, produce


def test_ledger_replay_follows_fsyncs_truncations_renames_and_deletions(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "t-0").mkdir(parents=True)
    ledger = tmp_path / "ledger"
    files.open_fsync_ledger(ledger, data)
    try:
        log = data / "t-0" / "00000000000000000000.log"
        fd = os.open(log, os.O_RDWR | os.O_CREAT, 0o644)
        os.write(fd, b"a" * 100)
        files.fsync(fd, log)
        os.write(fd, b"b" * 50)  # not fsynced
        assert read_ledger(ledger)["t-0/00000000000000000000.log"] == 100
        os.ftruncate(fd, 80)
        files.note_length(log, 80)
        assert read_ledger(ledger)["t-0/00000000000000000000.log"] == 80
        files.note_length(log, 120)  # a truncation never makes more bytes durable
        assert read_ledger(ledger)["t-0/00000000000000000000.log"] == 80
        os.close(fd)
        files.write_atomically(data / "checkpoint", b"0\n1\nt 0 5\n")
        assert read_ledger(ledger)["checkpoint"] == 10
        assert "checkpoint.tmp" not in read_ledger(ledger)
        files.replace(data / "checkpoint", data / "renamed")
        replayed = read_ledger(ledger)
        assert replayed["renamed"] == 10
        assert "checkpoint" not in replayed
        files.unlink(data / "renamed")
        assert "renamed" not in read_ledger(ledger)
        files.note_deleted(data / "t-0", tree=True)
        assert read_ledger(ledger) == {}
    finally:
        files.close_fsync_ledger()
    lines = ledger.read_text().splitlines()
    assert lines[0] == "t-0/00000000000000000000.log\t100"
    assert "renamed\tdeleted" in lines


def test_broker_ledger_covers_every_acked_byte(tmp_path: Path) -> None:
    ledger = tmp_path / "fsync.ledger"
    data = tmp_path / "data"
    with running_broker(data, f"exactly.debug.fsync.ledger={ledger}") as broker:
        create_topic(broker.bootstrap, "led", 2)
        produced = Produced()
        produce(broker.bootstrap, "led", 2, 300, produced)
        assert len(produced.acked_all) == 600
        durable = read_ledger(ledger)
        for p in range(2):
            log = data / f"led-{p}" / "00000000000000000000.log"
            # Nothing but these acks=all records was written: every byte of the log was fsynced before
            # its acknowledgement, so the ledger's length is the whole file.
            assert durable[f"led-{p}/00000000000000000000.log"] == log.stat().st_size > 300 * 100
        assert "__cluster_metadata.log" in durable
        broker.kill()
    # Every length recorded for a file that is still there is at most its size (no invented bytes).
    for name, length in read_ledger(ledger).items():
        path = data / name
        if path.exists():
            assert length <= path.stat().st_size, name


def test_acks_one_is_not_in_the_ledger(tmp_path: Path) -> None:
    ledger = tmp_path / "fsync.ledger"
    data = tmp_path / "data"
    with running_broker(data, f"exactly.debug.fsync.ledger={ledger}") as broker:
        create_topic(broker.bootstrap, "one", 1)
        produced = Produced()
        produce(broker.bootstrap, "one", 1, 50, produced)
        synced = read_ledger(ledger)["one-0/00000000000000000000.log"]
        produce(broker.bootstrap, "one", 1, 50, produced, acks="1")
        log = data / "one-0" / "00000000000000000000.log"
        assert log.stat().st_size > synced
        assert read_ledger(ledger)["one-0/00000000000000000000.log"] == synced
        broker.kill()


def test_fsyncs_inside_synced_together_wait_for_one_sync_at_its_end(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "t-0").mkdir(parents=True)
    ledger = tmp_path / "ledger"
    files.open_fsync_ledger(ledger, data)
    try:
        log = data / "t-0" / "00000000000000000000.log"
        with files.synced_together():
            fd = os.open(log, os.O_RDWR | os.O_CREAT, 0o644)
            os.write(fd, b"a" * 100)
            files.fsync(fd, log)
            os.write(fd, b"b" * 20)
            os.close(fd)
            files.write_atomically(data / "snapshot", b"x" * 7)
            assert read_ledger(ledger) == {}  # nothing claimed durable yet
        replayed = read_ledger(ledger)
        assert replayed["t-0/00000000000000000000.log"] == 120  # its length at the sync
        assert replayed["snapshot"] == 7  # followed through the rename
        assert "snapshot.tmp" not in replayed
        fd = os.open(log, os.O_RDWR | os.O_APPEND)
        os.write(fd, b"c" * 5)
        files.fsync(fd, log)  # after the block: an fsync of its own again
        os.close(fd)
        assert read_ledger(ledger)["t-0/00000000000000000000.log"] == 125
    finally:
        files.close_fsync_ledger()
