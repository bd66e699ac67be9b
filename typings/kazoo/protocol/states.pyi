from typing import NamedTuple

class KazooState:
    SUSPENDED: str
    CONNECTED: str
    LOST: str

class ZnodeStat(NamedTuple):
    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeralOwner: int
    dataLength: int
    numChildren: int
    pzxid: int
    @property
    def acl_version(self) -> int: ...
    @property
    def children_version(self) -> int: ...
    @property
    def created(self) -> float: ...
    @property
    def last_modified(self) -> float: ...
    @property
    def owner_session_id(self) -> int | None: ...
    @property
    def creation_transaction_id(self) -> int: ...
    @property
    def last_modified_transaction_id(self) -> int: ...
    @property
    def data_length(self) -> int: ...
    @property
    def children_count(self) -> int: ...

class WatchedEvent(NamedTuple):
    type: str
    state: str
    path: str | None
