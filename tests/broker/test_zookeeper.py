"""`ZooKeeper` against a real ZooKeeper and real kazoo: reads and writes with their errors, versioned writes
and atomic multi-ops, ephemerals that go with their session, watches delivered in the event loop that
survive a lost session and a server restart, and the session states around them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from exactly.broker.zookeeper import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionState,
    ZnodeStat,
    ZooKeeper,
    ZooKeeperUnavailable,
    check,
    create_op,
    delete_op,
    set_op,
    split_connect,
)
from exactly.testing.processes import free_port
from exactly.testing.zookeeper import ZooKeeperProcess
from tests.broker.parts import until

pytestmark = pytest.mark.timeout(60)


def run_with(connect: str, test: Callable[[ZooKeeper], Awaitable[None]], **options: int) -> None:
    """Run `test(zk)` on a fresh event loop with a started ZooKeeper, stopped afterwards."""

    async def main() -> None:
        zk = ZooKeeper(connect, **options)
        await zk.start()
        try:
            await test(zk)
        finally:
            await zk.stop()

    asyncio.run(main())


def test_split_connect() -> None:
    assert split_connect("127.0.0.1:2181") == ("127.0.0.1:2181", "")
    assert split_connect("a:1,b:2/exactly/t1/") == ("a:1,b:2", "/exactly/t1")
    assert split_connect("a:1/") == ("a:1", "")


def test_create_get_set_delete(zk_connect: str) -> None:
    async def test(zk: ZooKeeper) -> None:
        assert zk.connected
        assert zk.session_id is not None
        assert await zk.get("/a") is None
        assert await zk.exists("/a") is None
        assert await zk.get_children("/a") is None

        assert await zk.create("/a", b"one") == "/a"
        found = await zk.get("/a")
        assert found is not None
        data, stat = found
        assert (data, stat.version) == (b"one", 0)
        assert isinstance(stat, ZnodeStat)
        assert stat.ephemeralOwner == 0

        stat = await zk.set("/a", b"two", version=0)
        assert stat.version == 1
        with pytest.raises(BadVersionError):
            await zk.set("/a", b"stale", version=0)
        assert await zk.get("/a") == (b"two", stat)
        assert (await zk.set("/a", b"three")).version == 2  # -1: any version

        with pytest.raises(NodeExistsError):
            await zk.create("/a")
        with pytest.raises(NoNodeError):
            await zk.create("/x/y")
        assert await zk.create("/x/y", b"deep", makepath=True) == "/x/y"
        first = await zk.create("/x/item-", sequence=True)
        second = await zk.create("/x/item-", sequence=True)
        assert (first, second) == ("/x/item-0000000001", "/x/item-0000000002")  # /x/y was the first child
        assert sorted(await zk.get_children("/x") or []) == ["item-0000000001", "item-0000000002", "y"]
        await zk.ensure_path("/p/q/r")
        await zk.ensure_path("/p/q/r")  # already there: no error
        assert await zk.get_children("/p/q") == ["r"]
        assert sorted(await zk.get_children("/") or []) == ["a", "p", "x"]

        with pytest.raises(BadVersionError):
            await zk.delete("/a", version=0)
        await zk.delete("/a", version=2)
        assert await zk.exists("/a") is None
        with pytest.raises(NoNodeError):
            await zk.delete("/a")
        with pytest.raises(NotEmptyError):
            await zk.delete("/x")
        await zk.delete("/x", recursive=True)
        await zk.delete("/x", recursive=True)  # recursive: a missing node is no error
        assert await zk.get_children("/") == ["p"]

        # the nodes live under the chroot
        hosts, chroot = split_connect(zk_connect)
        plain = KazooClient(hosts=hosts)
        await asyncio.to_thread(plain.start)
        try:
            assert await asyncio.to_thread(plain.get_children, chroot) == ["p"]
        finally:
            await asyncio.to_thread(plain.stop)
            plain.close()

    run_with(zk_connect, test)


def test_commit_is_atomic_and_raises_the_failing_ops_error(zk_connect: str) -> None:
    async def test(zk: ZooKeeper) -> None:
        await zk.create("/epoch", b"7")
        await zk.create("/state", b"old")
        await zk.create("/gone")

        await zk.commit([check("/epoch", 0), set_op("/state", b"new", 0), create_op("/made", b"m")])
        assert await zk.get("/state") == (b"new", await zk.exists("/state"))
        assert (await zk.get("/made") or (b"", None))[0] == b"m"

        # a failed check changes nothing, whatever its place in the list
        for ops in (
            [check("/epoch", 5), set_op("/state", b"fenced"), create_op("/other"), delete_op("/gone")],
            [set_op("/state", b"fenced"), create_op("/other"), delete_op("/gone"), check("/epoch", 5)],
        ):
            with pytest.raises(BadVersionError):
                await zk.commit(ops)
            assert (await zk.get("/state") or (b"", None))[0] == b"new"
            assert await zk.exists("/other") is None
            assert await zk.exists("/gone") is not None

        with pytest.raises(BadVersionError):
            await zk.commit([set_op("/state", b"x", version=0)])  # it is at 1
        with pytest.raises(NodeExistsError):
            await zk.commit([create_op("/other"), create_op("/made")])
        with pytest.raises(NoNodeError):
            await zk.commit([delete_op("/missing")])
        with pytest.raises(NoNodeError):
            await zk.commit([check("/missing", 0)])
        assert await zk.exists("/other") is None

        await zk.commit([delete_op("/gone", 0), create_op("/eph", ephemeral=True)])
        assert await zk.exists("/gone") is None
        stat = await zk.exists("/eph")
        assert stat is not None
        assert stat.ephemeralOwner == zk.session_id

    run_with(zk_connect, test)


def test_an_ephemeral_goes_with_its_session_and_a_watch_sees_it_in_the_loop(zk_connect: str) -> None:
    async def main() -> None:
        loop_thread = threading.get_ident()
        watcher, broker = ZooKeeper(zk_connect), ZooKeeper(zk_connect)
        await watcher.start()
        await broker.start()
        try:
            await watcher.ensure_path("/brokers/ids")
            seen: list[list[str]] = []
            threads: set[int] = set()

            def children(names: list[str]) -> None:
                threads.add(threading.get_ident())
                seen.append(sorted(names))

            watcher.watch_children("/brokers/ids", children)
            await until(lambda: seen == [[]])
            await broker.create("/brokers/ids/1", b"{}", ephemeral=True)
            await until(lambda: seen[-1] == ["1"])
            stat = await watcher.exists("/brokers/ids/1")
            assert stat is not None
            assert stat.ephemeralOwner == broker.session_id != watcher.session_id
            await broker.stop()  # closes the session: the ephemeral goes at once
            await until(lambda: seen[-1] == [])
            assert await watcher.exists("/brokers/ids/1") is None
            assert threads == {loop_thread}
        finally:
            await broker.stop()
            await watcher.stop()

    asyncio.run(main())


def test_watch_data_delivers_create_change_delete_until_cancelled(zk_connect: str) -> None:
    async def test(zk: ZooKeeper) -> None:
        loop_thread = threading.get_ident()
        values: list[tuple[bytes | None, int | None]] = []
        threads: set[int] = set()

        def changed(data: bytes | None, stat: ZnodeStat | None) -> None:
            threads.add(threading.get_ident())
            values.append((data, None if stat is None else stat.version))

        watch = zk.watch_data("/w", changed)
        await until(lambda: values == [(None, None)])  # no node yet
        await zk.create("/w", b"1")
        await until(lambda: values[-1] == (b"1", 0))
        await zk.set("/w", b"2")
        await until(lambda: values[-1] == (b"2", 1))
        await zk.delete("/w")
        await until(lambda: values[-1] == (None, None))
        await zk.create("/w", b"3")
        await until(lambda: values[-1] == (b"3", 0))
        assert threads == {loop_thread}

        watch.cancel()
        delivered = len(values)
        later: list[bytes | None] = []  # armed after the cancelled one: kazoo runs both in order
        zk.watch_data("/w", lambda data, stat: later.append(data))
        await until(lambda: later == [b"3"])
        await zk.set("/w", b"4")
        await until(lambda: later[-1] == b"4")
        assert len(values) == delivered

    run_with(zk_connect, test)


def test_an_expired_session_is_lost_then_replaced_and_watches_carry_on(zk_connect: str) -> None:
    async def test(zk: ZooKeeper) -> None:
        states: list[SessionState] = []
        zk.on_state(states.append)
        data: list[bytes | None] = []
        children: list[list[str]] = []
        zk.watch_data("/e", lambda value, stat: data.append(value))
        zk.watch_children("/", lambda names: children.append(sorted(names)))
        await until(lambda: data == [None] and children == [[]])
        await zk.create("/e", b"mine", ephemeral=True)
        await until(lambda: data[-1] == b"mine" and children[-1] == ["e"])
        old_session = zk.session_id

        # a second client on the same session id and password, closed: the server ends the session
        client_id = zk.client_id
        assert client_id is not None
        hosts, _ = split_connect(zk_connect)

        def expire() -> None:
            thief = KazooClient(hosts=hosts, client_id=client_id)
            thief.start()
            thief.stop()
            thief.close()

        # kazoo connects the new session before the event loop hears of the LOST one: until both are
        # delivered, connected_now does not take the new session for the one the loop knows
        connected_now: list[bool] = []
        zk.on_state(lambda state: connected_now.append(zk.connected_now))
        await asyncio.to_thread(expire)
        await until(lambda: SessionState.LOST in states and states[-1] is SessionState.CONNECTED)
        assert connected_now[states.index(SessionState.LOST) - len(states)] is False
        assert zk.connected_now
        assert states.index(SessionState.LOST) < len(states) - 1
        assert zk.connected
        assert zk.session_id not in (None, old_session)
        assert await zk.exists("/e") is None  # the old session's ephemeral is gone
        await until(lambda: data[-1] is None and children[-1] == [])

        # the watches were re-registered on the new session
        await zk.create("/e", b"again", ephemeral=True)
        await until(lambda: data[-1] == b"again" and children[-1] == ["e"])
        await zk.create("/f")
        await until(lambda: children[-1] == ["e", "f"])

    run_with(zk_connect, test, session_timeout_ms=6000)


def test_a_server_restart_suspends_the_session_which_survives(tmp_path: Path) -> None:
    server = ZooKeeperProcess(tmp_path / "zk").start()
    try:

        async def test(zk: ZooKeeper) -> None:
            states: list[SessionState] = []
            zk.on_state(states.append)
            await zk.create("/ids/1", ephemeral=True, makepath=True)
            data: list[bytes | None] = []
            children: list[list[str]] = []
            zk.watch_data("/watched", lambda value, stat: data.append(value))
            zk.watch_children("/ids", lambda names: children.append(sorted(names)))
            await until(lambda: data == [None] and children == [["1"]])
            session = zk.session_id
            assert zk.connected_now

            # kazoo's own state, read at once: not connected from the moment the server is gone
            await asyncio.to_thread(server.stop)
            await until(lambda: not zk.connected_now)
            await asyncio.to_thread(server.start)
            await until(lambda: states[-2:] == [SessionState.SUSPENDED, SessionState.CONNECTED])
            assert SessionState.LOST not in states
            assert zk.session_id == session
            assert zk.connected_now
            stat = await zk.exists("/ids/1")
            assert stat is not None
            assert stat.ephemeralOwner == session

            await zk.create("/watched", b"after")
            await zk.create("/ids/2", ephemeral=True)
            await until(lambda: data[-1] == b"after" and children[-1] == ["1", "2"])

        run_with(server.connect_string, test, session_timeout_ms=6000)
    finally:
        server.stop()


def test_start_gives_up_after_the_connection_timeout() -> None:
    async def main() -> None:
        zk = ZooKeeper(f"127.0.0.1:{free_port()}", connection_timeout_ms=300)
        with pytest.raises(ZooKeeperUnavailable):
            await zk.start()
        assert not zk.connected
        assert zk.session_id is None

    asyncio.run(main())
