"""Helpers for the consumer-group interop tests: member processes (tests/interop/group_member.py) whose
JSON event lines are collected in a thread, producing numbered records, and raw group requests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.describe_groups import DescribedGroup, DescribeGroupsRequest
from exactly.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from tests.interop.client import RawClient

ROOT = Path(__file__).resolve().parents[2]


class Member:
    """A consumer group member in its own process."""

    def __init__(
        self,
        client: str,
        bootstrap: str,
        group: str,
        topic: str,
        name: str,
        log_dir: Path,
        *,
        strategy: str = "range",
        instance_id: str | None = None,
        session_ms: int = 6000,
        protocol: str = "classic",
    ) -> None:
        self.name = name
        args = [
            sys.executable,
            "-m",
            "tests.interop.group_member",
            "--client",
            client,
            "--bootstrap",
            bootstrap,
            "--group",
            group,
            "--topic",
            topic,
            "--strategy",
            strategy,
            "--session-ms",
            str(session_ms),
            "--name",
            name,
        ]
        if instance_id:
            args += ["--instance-id", instance_id]
        if protocol != "classic":
            args += ["--protocol", protocol]
        self.stderr_path = log_dir / f"member-{name}.log"
        stderr = open(self.stderr_path, "ab")  # noqa: SIM115 (the child keeps it)
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}"}
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=stderr, cwd=ROOT, env=env, text=True, bufsize=1
        )
        stderr.close()
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            event["t"] = time.monotonic()
            with self._lock:
                self.events.append(event)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    @property
    def assignment(self) -> list[int] | None:
        """The latest assignment (None before the first)."""
        assigned = [e for e in self.snapshot() if e["event"] == "assigned"]
        return assigned[-1]["partitions"] if assigned else None

    def assignment_changes(self) -> int:
        return sum(1 for e in self.snapshot() if e["event"] == "assigned")

    @property
    def values(self) -> list[str]:
        return [e["value"] for e in self.snapshot() if e["event"] == "record"]

    def records(self) -> list[tuple[int, int, str]]:
        return [(e["partition"], e["offset"], e["value"]) for e in self.snapshot() if e["event"] == "record"]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def terminate(self, timeout: float = 30.0) -> None:
        """SIGTERM: the member closes its consumer cleanly (LeaveGroup) and exits."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise

    def describe(self) -> str:
        tail = self.stderr_path.read_text(errors="replace")[-1500:] if self.stderr_path.exists() else ""
        events = [{k: v for k, v in e.items() if k != "t"} for e in self.snapshot()[-8:]]
        return f"member {self.name} (alive={self.alive()}): last events {events}\nstderr: {tail}"


def wait_until(
    condition: Callable[[], bool], timeout: float, what: str, *, describe: Callable[[], str] = str
) -> float:
    """Poll `condition` until true; returns the seconds it took. Fails with `what` after `timeout`."""
    start = time.monotonic()
    while True:
        if condition():
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for: {what}\n{describe()}")
        time.sleep(0.05)


def produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    """values[i] goes to partition i % partitions, acks=all."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value.encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    client = RawClient(bootstrap)
    try:
        response = client.request(
            ApiKey.OFFSET_FETCH,
            3,
            OffsetFetchRequest(group, [OffsetFetchRequestTopic(topic, list(range(partitions)))]),
        )
    finally:
        client.close()
    return {p.partition_index: p.committed_offset for t in response.topics for p in t.partitions}


def describe_group(bootstrap: str, group: str) -> DescribedGroup:
    client = RawClient(bootstrap)
    try:
        response = client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest([group]))
    finally:
        client.close()
    described: DescribedGroup = response.groups[0]
    return described


def covers(members: list[Member], partitions: int) -> bool:
    """Every partition is assigned to exactly one of `members`, and every member has some."""
    owned: list[int] = []
    for m in members:
        if not m.alive():
            raise AssertionError(f"member {m.name} died:\n{m.describe()}")
        assignment = m.assignment
        if not assignment:
            return False
        owned += assignment
    return sorted(owned) == list(range(partitions))
