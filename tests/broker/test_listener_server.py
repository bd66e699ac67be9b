"""ListenerServer when the process is out of descriptors: a client that arrives then waits in the backlog,
one WARNING says why, and the client is served once descriptors free up (issue 14: accepting a
connection never fails for good because something else took every descriptor).

The scenario runs in a child process (under uvloop, as the broker does) whose descriptors are used up on
purpose, so that the test process keeps its own."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCENARIO = textwrap.dedent(
    """
    import asyncio, logging, os, resource, socket, sys
    import uvloop
    from exactly.broker.connection_slots import ConnectionSlots
    from exactly.broker.listener_server import ListenerServer

    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(levelname)s %(message)s")
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    class Lines(logging.Handler):
        def __init__(self):
            super().__init__()
            self.seen = asyncio.Event()
            self.text = ""
        def emit(self, record):
            self.text += record.getMessage() + "\\n"
            self.seen.set()

    async def main():
        lines = Lines()
        logging.getLogger("exactly.broker.listener_server").addHandler(lines)

        async def upper(reader, writer, principal):
            writer.write((await reader.readexactly(5)).upper())
            await writer.drain()
            writer.close()

        loop = asyncio.get_running_loop()
        server = await ListenerServer.start(
            "PLAINTEXT", "127.0.0.1", 0, None, ConnectionSlots(lambda: 1000), upper, 65536
        )
        port = server.sockets[0].getsockname()[1]
        client = socket.socket()
        client.setblocking(False)
        filler = []
        while True:  # use up every descriptor
            try:
                filler.append(os.open("/dev/null", os.O_RDONLY))
            except OSError:
                break
        assert client.connect_ex(("127.0.0.1", port)) in (0, 115)  # EINPROGRESS
        while "cannot accept" not in lines.text:
            lines.seen.clear()
            await asyncio.wait_for(lines.seen.wait(), 30)
        print("EXHAUSTED", len(filler), flush=True)
        for fd in filler[:16]:
            os.close(fd)
        await loop.sock_sendall(client, b"hello")
        answer = await asyncio.wait_for(loop.sock_recv(client, 5), 30)
        print("ANSWER", answer.decode(), flush=True)
        server.close()
        await server.wait_closed()

    uvloop.run(main())
    """
)


def test_a_client_arriving_while_descriptors_are_used_up_is_served_once_they_free_up() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCENARIO], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    warnings = [line for line in lines if line.startswith("WARNING ")]
    assert len(warnings) == 2, lines  # one when accepting fails, one when it works again
    assert "listener PLAINTEXT: cannot accept a connection: Too many open files" in warnings[0]
    assert "listener PLAINTEXT: accepting again after" in warnings[1]
    assert lines[-1] == "ANSWER HELLO"
    assert any(line.startswith("EXHAUSTED ") for line in lines)
