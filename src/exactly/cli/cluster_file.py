"""`cluster.json`: the record `exactly cluster up` leaves in its directory of what it started (ZooKeeper
and the brokers, their pids, ports, data directories and logs), so that `exactly cluster status` and
`exactly cluster down` can find the processes again from another shell.

The file (UTF-8 JSON, version 1):

    {
      "version": 1,
      "zookeeper": {"connect": "127.0.0.1:2181", "port": 2181, "pid": 4242,
                    "data_dir": "/abs/DIR/zookeeper", "log_file": "/abs/DIR/zookeeper/zookeeper.log"},
      "brokers": [
        {"id": 1, "pid": 4243, "port": 40001, "data_dir": "/abs/DIR/broker-1/data",
         "log_file": "/abs/DIR/broker-1.log"},
        ...
      ]
    }

`zookeeper.pid`, `data_dir` and `log_file` are null for a ZooKeeper the cluster did not start
(`--zookeeper HOST:PORT`); `down` leaves such a server alone.

A pid alone may be reused by the kernel once its process is gone; `owns` therefore also checks the
process's command line: a broker's names its data directory, the ZooKeeper's names its zoo.cfg. A zombie
(exited but not reaped, which happens to the orphans of a container whose init does not reap) counts as
gone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CLUSTER_FILE",
    "FORMAT_VERSION",
    "BrokerEntry",
    "ClusterFile",
    "ClusterFileError",
    "ZooKeeperEntry",
    "owns",
    "process_alive",
]

CLUSTER_FILE = "cluster.json"
FORMAT_VERSION = 1


class ClusterFileError(ValueError):
    """cluster.json is not what `exactly cluster up` writes."""


@dataclass(frozen=True, slots=True)
class ZooKeeperEntry:
    connect: str
    port: int
    pid: int | None  # None: an existing ZooKeeper, not ours to stop
    data_dir: str | None
    log_file: str | None

    @property
    def managed(self) -> bool:
        return self.pid is not None

    @property
    def marker(self) -> str | None:
        """The argument that identifies the server's command line: its zoo.cfg."""
        return None if self.data_dir is None else str(Path(self.data_dir) / "zoo.cfg")


@dataclass(frozen=True, slots=True)
class BrokerEntry:
    id: int
    pid: int
    port: int
    data_dir: str
    log_file: str

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def marker(self) -> str:
        """The argument that identifies the broker's command line: its data directory."""
        return self.data_dir


@dataclass(frozen=True, slots=True)
class ClusterFile:
    zookeeper: ZooKeeperEntry
    brokers: tuple[BrokerEntry, ...]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def to_json(self) -> str:
        return (
            json.dumps(
                {
                    "version": FORMAT_VERSION,
                    "zookeeper": {
                        "connect": self.zookeeper.connect,
                        "port": self.zookeeper.port,
                        "pid": self.zookeeper.pid,
                        "data_dir": self.zookeeper.data_dir,
                        "log_file": self.zookeeper.log_file,
                    },
                    "brokers": [
                        {
                            "id": b.id,
                            "pid": b.pid,
                            "port": b.port,
                            "data_dir": b.data_dir,
                            "log_file": b.log_file,
                        }
                        for b in self.brokers
                    ],
                },
                indent=2,
            )
            + "\n"
        )

    @classmethod
    def from_json(cls, text: str) -> ClusterFile:
        try:
            doc = json.loads(text)
            if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
                raise ClusterFileError(f"not a version {FORMAT_VERSION} cluster file")
            zk = doc["zookeeper"]
            zookeeper = ZooKeeperEntry(
                connect=_str(zk["connect"]),
                port=_int(zk["port"]),
                pid=None if zk["pid"] is None else _int(zk["pid"]),
                data_dir=None if zk["data_dir"] is None else _str(zk["data_dir"]),
                log_file=None if zk["log_file"] is None else _str(zk["log_file"]),
            )
            brokers = tuple(
                BrokerEntry(
                    id=_int(b["id"]),
                    pid=_int(b["pid"]),
                    port=_int(b["port"]),
                    data_dir=_str(b["data_dir"]),
                    log_file=_str(b["log_file"]),
                )
                for b in doc["brokers"]
            )
        except (ValueError, KeyError, TypeError) as e:
            if isinstance(e, ClusterFileError):
                raise
            raise ClusterFileError(f"malformed cluster file: {type(e).__name__}: {e}") from None
        return cls(zookeeper, brokers)

    def write(self, path: Path) -> None:
        """Atomically (a temporary file renamed over `path`)."""
        partial = path.with_name(path.name + ".tmp")
        partial.write_text(self.to_json())
        partial.replace(path)

    @classmethod
    def read(cls, path: Path) -> ClusterFile:
        return cls.from_json(path.read_text())


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ClusterFileError(f"expected an integer, not {value!r}")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ClusterFileError(f"expected a string, not {value!r}")
    return value


def process_alive(pid: int, proc_root: Path = Path("/proc")) -> bool:
    """Whether `pid` exists and is not a zombie."""
    try:
        stat = (proc_root / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    # "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ')'
    state = stat[stat.rfind(")") + 1 :].split()[:1]
    return state not in (["Z"], ["X"], [])


def owns(pid: int, marker: str, proc_root: Path = Path("/proc")) -> bool:
    """Whether `pid` is alive and `marker` is one of the arguments of its command line."""
    if not process_alive(pid, proc_root):
        return False
    try:
        raw = (proc_root / str(pid) / "cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    return marker in raw.decode(errors="replace").split("\0")
