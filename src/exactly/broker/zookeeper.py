"""`ZooKeeper`: the replicated cluster's session with ZooKeeper, an asyncio shell over kazoo's KazooClient.

Kafka in ZooKeeper mode keeps its shared state in znodes: broker registrations are ephemerals whose
`czxid` is the broker epoch, the controller is an ephemeral, partition states are fenced by `stat.version`
and controller writes are multi-ops guarded by a version check (Kafka's ZkData and KafkaZkClient). This
module gives the broker that vocabulary without ever blocking its event loop.

Threads. kazoo runs its own threads (a connection thread and a callback/completion thread). Every
request goes through kazoo's `*_async` method; its IAsyncResult is `rawlink`ed to a callback that runs in a
kazoo thread and only hands the value or exception to the event loop with `loop.call_soon_threadsafe`,
where the awaiting asyncio future completes. Session-state changes and watch deliveries take the same
path, so every callback given to this class runs in the event loop. Three things have no async form in
kazoo and run on threads instead: `stop()` (kazoo's stop/close join its connection thread) and the
creation of a missing chroot (a short-lived chroot-less KazooClient) run through `asyncio.to_thread`;
arming a watch (kazoo's DataWatch/ChildrenWatch read the node as they are constructed) runs on a thread
from kazoo's handler (`handler.spawn`), as kazoo's recipes do themselves.

Sessions. `SessionState` is kazoo's simplified state:
  CONNECTED  a live session.
  SUSPENDED  the connection dropped; the session may survive (its ephemerals and watches too) if the
             client reconnects within the session timeout. Act as if not in ZooKeeper's good graces.
  LOST       the session expired (the server deleted its ephemerals) or was closed. kazoo keeps
             reconnecting and, once it gets through, opens a NEW session and we report CONNECTED again
             (with a new `session_id`): a user must treat LOST -> CONNECTED as a fresh start (re-create
             its ephemerals, re-run elections). Our own `stop()` reports nothing.

Watches. `watch_data`/`watch_children` wrap kazoo's DataWatch/ChildrenWatch: they deliver the current
value once armed, then again after each change, re-arming themselves, and they re-register after a
reconnect and after a LOST session. Events coalesce: a callback gets the node's value when it was read,
which may skip intermediate values, so treat each delivery as "re-read the state", never as a diff.

Errors are kazoo's (re-exported here): NoNodeError, NodeExistsError, BadVersionError, NotEmptyError,
and ConnectionLoss/SessionExpiredError when the session is not there to answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.protocol.states import KazooState, WatchedEvent, ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry

from exactly.errors import ExactlyError

if TYPE_CHECKING:
    from kazoo.interfaces import IAsyncResult

__all__ = [
    "BadVersionError",
    "CheckOp",
    "ConnectionLoss",
    "CreateOp",
    "DeleteOp",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "Op",
    "SessionExpiredError",
    "SessionState",
    "SetOp",
    "Watch",
    "ZnodeStat",
    "ZooKeeper",
    "ZooKeeperUnavailable",
    "check",
    "create_op",
    "delete_op",
    "set_op",
]

logger = logging.getLogger(__name__)
# kazoo logs every connection and state change at INFO
logging.getLogger("kazoo").setLevel(logging.WARNING)

T = TypeVar("T")

# reconnect quickly after a drop (kazoo's default backoff grows to an hour); retry forever
RECONNECT_DELAY = 0.1
RECONNECT_MAX_DELAY = 1.0


class ZooKeeperUnavailable(ExactlyError):
    """No ZooKeeper session could be established within the connection timeout."""


class SessionState(Enum):
    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    LOST = "LOST"


@dataclass(frozen=True, slots=True)
class CheckOp:
    path: str
    version: int


@dataclass(frozen=True, slots=True)
class CreateOp:
    path: str
    data: bytes
    ephemeral: bool


@dataclass(frozen=True, slots=True)
class SetOp:
    path: str
    data: bytes
    version: int


@dataclass(frozen=True, slots=True)
class DeleteOp:
    path: str
    version: int


Op = CheckOp | CreateOp | SetOp | DeleteOp


def check(path: str, version: int) -> CheckOp:
    """A multi-op step that fails the whole commit (BadVersionError, NoNodeError) unless `path` is at
    `version`."""
    return CheckOp(path, version)


def create_op(path: str, data: bytes = b"", ephemeral: bool = False) -> CreateOp:
    return CreateOp(path, data, ephemeral)


def set_op(path: str, data: bytes, version: int = -1) -> SetOp:
    return SetOp(path, data, version)


def delete_op(path: str, version: int = -1) -> DeleteOp:
    return DeleteOp(path, version)


class Watch:
    """A registered data or children watch; `cancel()` stops its deliveries at once (kazoo's watch
    unregisters at its next event)."""

    __slots__ = ("_cancelled", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self._cancelled = False

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        self._cancelled = True


def split_connect(connect: str) -> tuple[str, str]:
    """("127.0.0.1:2181,h2:2181", "/chroot") from "127.0.0.1:2181,h2:2181/chroot" ("" for no chroot)."""
    hosts, slash, chroot = connect.partition("/")
    root = posixpath.normpath("/" + chroot) if slash else "/"
    return hosts, "" if root == "/" else root


class ZooKeeper:
    """One ZooKeeper session. Create, `await start()`, use, `await stop()`; start and stop once each.
    All methods must be called from the event loop `start()` ran in."""

    def __init__(
        self, connect: str, session_timeout_ms: int = 18000, connection_timeout_ms: int | None = None
    ) -> None:
        """`connect`: "host:port[,host:port...][/chroot]"; a missing chroot node is created at start.
        `connection_timeout_ms`: how long `start()` waits for a session (default: the session timeout,
        as Kafka's zookeeper.connection.timeout.ms)."""
        self.connect = connect
        self.hosts, self.chroot = split_connect(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = (
            session_timeout_ms if connection_timeout_ms is None else connection_timeout_ms
        )
        self._client = KazooClient(
            hosts=connect,
            timeout=session_timeout_ms / 1000,
            connection_retry=KazooRetry(max_tries=-1, delay=RECONNECT_DELAY, max_delay=RECONNECT_MAX_DELAY),
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._state = SessionState.LOST
        self._session: tuple[int, bytes] | None = None
        self._state_callbacks: list[Callable[[SessionState], None]] = []
        self._watches: list[Watch] = []
        self._connected_waiter: asyncio.Future[None] | None = None
        self._started = False
        self._stopping = False

    # -- session -----------------------------------------------------------------------------------------

    @property
    def session_id(self) -> int | None:
        """The current session's id: kept while SUSPENDED (the session may survive), None before the first
        session, after LOST until the next one, and after `stop()`."""
        return None if self._session is None else self._session[0]

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """(session id, session password), as kazoo's `client_id`: another client that connects with it and
        closes ends this session (how the tests force an expiry)."""
        return self._session

    @property
    def connected(self) -> bool:
        return self._state is SessionState.CONNECTED

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def connected_now(self) -> bool:
        """kazoo's own view, read at once rather than after the event loop's delivery: connected, in the
        session the event loop knows. False from the moment kazoo's connection thread misses a heartbeat
        (two thirds of the session timeout after the last answer, so before the server can expire the
        session and the controller move this broker's partitions), and in a new session until its
        CONNECTED has been delivered (after the LOST before it)."""
        session = self._session
        if session is None or self._client.state != KazooState.CONNECTED:
            return False
        current = self._client.client_id
        return current is not None and current[0] == session[0]

    def on_state(self, callback: Callable[[SessionState], None]) -> None:
        """Call `callback` in the event loop on each state change (see the module docstring for LOST)."""
        self._state_callbacks.append(callback)

    async def start(self) -> None:
        """Connect (and create the chroot node if missing); raise ZooKeeperUnavailable if no session is
        established within the connection timeout."""
        if self._started:
            raise RuntimeError("ZooKeeper.start() may be called once")
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._connected_waiter = self._loop.create_future()
        self._client.add_listener(self._kazoo_state)
        self._client.start_async()
        try:
            async with asyncio.timeout(self.connection_timeout_ms / 1000):
                await asyncio.shield(self._connected_waiter)
        except TimeoutError:
            await self._close_client()
            raise ZooKeeperUnavailable(
                f"no ZooKeeper session with {self.hosts} within {self.connection_timeout_ms} ms"
            ) from None
        if self.chroot and await self.exists("/") is None:
            await asyncio.to_thread(
                _create_chroot, self.hosts, self.chroot, self.connection_timeout_ms / 1000
            )

    async def stop(self) -> None:
        """Close the session: the server deletes its ephemerals at once and fires the watches on them.
        No state is reported and no watch delivers after this."""
        if self._stopping:
            return
        self._stopping = True
        for watch in self._watches:
            watch.cancel()
        self._watches.clear()
        await self._close_client()
        self._session = None
        self._state = SessionState.LOST

    async def _close_client(self) -> None:
        self._stopping = True
        await asyncio.to_thread(self._client.stop)
        await asyncio.to_thread(self._client.close)

    def _kazoo_state(self, state: str) -> None:
        """kazoo's listener, in kazoo's connection thread: must not block."""
        # client_id is readable now (kazoo marks the connection live before it calls listeners)
        session = self._client.client_id if state == KazooState.CONNECTED else None
        self._post(self._deliver_state, SessionState(state), session)

    def _deliver_state(self, state: SessionState, session: tuple[int, bytes] | None) -> None:
        if self._stopping:
            return
        if state is SessionState.CONNECTED:
            self._session = session
        elif state is SessionState.LOST:
            self._session = None
        if state is self._state:
            return
        self._state = state
        waiter = self._connected_waiter
        if state is SessionState.CONNECTED and waiter is not None and not waiter.done():
            waiter.set_result(None)
        for callback in list(self._state_callbacks):
            try:
                callback(state)
            except Exception:
                logger.exception("ZooKeeper state callback %r failed", callback)

    # -- the bridge from kazoo's threads to the loop ----------------------------------------------------

    def _post(self, function: Callable[..., None], *args: object) -> None:
        """Run `function(*args)` in the event loop; called from kazoo's threads."""
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is listening any more
            loop.call_soon_threadsafe(function, *args)

    def _await(self, result: IAsyncResult[T]) -> asyncio.Future[T]:
        """An asyncio future completed (in the loop) from a kazoo async result."""
        assert self._loop is not None, "ZooKeeper.start() was not called"
        future: asyncio.Future[T] = self._loop.create_future()

        def completed(done: IAsyncResult[T]) -> None:  # in a kazoo thread
            if done.successful():
                self._post(_set_result, future, done.value)
            else:
                self._post(_set_exception, future, done.exception)

        result.rawlink(completed)
        return future

    # -- reads and writes --------------------------------------------------------------------------------

    async def get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        """The node's data and stat, None if there is no such node."""
        try:
            return await self._await(self._client.get_async(path))
        except NoNodeError:
            return None

    async def get_children(self, path: str) -> list[str] | None:
        """The children's names (unordered), None if there is no such node."""
        try:
            return await self._await(self._client.get_children_async(path))
        except NoNodeError:
            return None

    async def exists(self, path: str) -> ZnodeStat | None:
        return await self._await(self._client.exists_async(path))

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        """Create the node; returns its path (with the sequence suffix when `sequence`). NodeExistsError,
        NoNodeError (no parent, unless `makepath`)."""
        return await self._await(
            self._client.create_async(path, data, ephemeral=ephemeral, sequence=sequence, makepath=makepath)
        )

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        """Replace the data if the node is at `version` (-1: any). BadVersionError, NoNodeError."""
        return await self._await(self._client.set_async(path, data, version))

    async def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """Delete the node if at `version` (-1: any). NoNodeError, BadVersionError, NotEmptyError.
        `recursive` deletes the children first, depth-first and not atomically (as kazoo does); a missing
        node is then no error, and `version` applies to `path` itself."""
        if not recursive:
            await self._await(self._client.delete_async(path, version))
            return
        children = await self.get_children(path)
        if children is None:
            return
        for child in children:
            await self.delete(posixpath.join(path, child), recursive=True)
        with contextlib.suppress(NoNodeError):
            await self._await(self._client.delete_async(path, version))

    async def ensure_path(self, path: str) -> None:
        """Create `path` and its missing ancestors (empty, persistent)."""
        await self._await(self._client.ensure_path_async(path))

    async def commit(self, ops: list[Op]) -> None:
        """Apply `ops` atomically (a ZooKeeper multi-op): all or none. On failure raise the failing op's
        error (BadVersionError for a failed check or versioned set/delete, NoNodeError, NodeExistsError...),
        not the RolledBackError kazoo reports for the others."""
        transaction = self._client.transaction()
        for op in ops:
            match op:
                case CheckOp(path, version):
                    transaction.check(path, version)
                case CreateOp(path, data, ephemeral):
                    transaction.create(path, data, ephemeral=ephemeral)
                case SetOp(path, data, version):
                    transaction.set_data(path, data, version)
                case DeleteOp(path, version):
                    transaction.delete(path, version)
        results = await self._await(transaction.commit_async())
        failures = [result for result in results if isinstance(result, BaseException)]
        if failures:
            real = [e for e in failures if not isinstance(e, RolledBackError | RuntimeInconsistency)]
            raise (real or failures)[0]

    # -- watches -----------------------------------------------------------------------------------------

    def watch_data(self, path: str, callback: Callable[[bytes | None, ZnodeStat | None], None]) -> Watch:
        """Call `callback(data, stat)` in the event loop with the node's value once armed and after each
        change; (None, None) while the node does not exist (it may be created later)."""
        watch = self._new_watch(path)

        def deliver(data: bytes | None, stat: ZnodeStat | None) -> None:  # in the loop
            if not watch.cancelled:
                callback(data, stat)

        def changed(
            data: bytes | None, stat: ZnodeStat | None, event: WatchedEvent | None = None
        ) -> bool | None:
            # in a kazoo thread; taking `event` keeps kazoo from calling again without it on a TypeError
            if watch.cancelled:
                return False  # kazoo stops this watch
            self._post(deliver, data, stat)
            return None

        self._arm(watch, lambda: DataWatch(self._client, path, changed))
        return watch

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> Watch:
        """Call `callback(children)` in the event loop with the node's children once armed and after each
        change. The node must exist: if it is missing, or once it is deleted, the watch ends (kazoo's
        ChildrenWatch), so watch a node that lives as long as the watch (e.g. /brokers/ids)."""
        watch = self._new_watch(path)

        def deliver(children: list[str]) -> None:  # in the loop
            if not watch.cancelled:
                callback(children)

        def changed(children: list[str]) -> bool | None:  # in a kazoo thread
            if watch.cancelled:
                return False
            self._post(deliver, list(children))
            return None

        self._arm(watch, lambda: ChildrenWatch(self._client, path, changed))
        return watch

    def _new_watch(self, path: str) -> Watch:
        if self._loop is None or self._stopping:
            raise RuntimeError("watch on a ZooKeeper that is not started (or stopped)")
        watch = Watch(path)
        self._watches = [w for w in self._watches if not w.cancelled]
        self._watches.append(watch)
        return watch

    def _arm(self, watch: Watch, make: Callable[[], object]) -> None:
        """Build kazoo's watch on a kazoo thread: its constructor reads the node (blocking, retried)."""

        def arm() -> None:
            if watch.cancelled:
                return
            try:
                make()
            except ConnectionClosedError:
                pass  # stopped meanwhile
            except KazooException:
                logger.exception("could not watch %s", watch.path)

        self._client.handler.spawn(arm)


def _set_result(future: asyncio.Future[T], value: T) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[T], exception: BaseException | None) -> None:
    if not future.done():
        future.set_exception(exception or KazooException("kazoo reported a failure without an exception"))


def _create_chroot(hosts: str, chroot: str, timeout: float) -> None:
    """Create `chroot` and its ancestors through a chroot-less session (blocking; run on a thread)."""
    client = KazooClient(hosts=hosts, timeout=timeout)
    try:
        client.start(timeout=timeout)
    except Exception as e:
        client.close()
        raise ZooKeeperUnavailable(f"no ZooKeeper session with {hosts} to create {chroot}") from e
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()
