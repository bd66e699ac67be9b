from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.protocol.states import WatchedEvent, ZnodeStat

class DataWatch:
    def __init__(
        self,
        client: KazooClient,
        path: str,
        func: Callable[[bytes | None, ZnodeStat | None, WatchedEvent | None], bool | None] | None = None,
    ) -> None: ...

class ChildrenWatch:
    def __init__(
        self,
        client: KazooClient,
        path: str,
        func: Callable[[list[str]], bool | None] | None = None,
        allow_session_lost: bool = True,
        send_event: bool = False,
    ) -> None: ...
