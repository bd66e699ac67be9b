"""`exactly -X KEY=VALUE`: the client commands pass security settings through to their clients, so they
work against an SSL listener with mutual TLS (issue 13)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from exactly.testing.processes import BrokerProcess, free_port
from tests.cli.helpers import assert_one_line_error
from tests.cli.helpers import run_cli as run
from tests.interop.support import scram_settings, store_scram_users
from tests.interop.tls_support import confluent_ssl, make_tls_files, ssl_settings, wait_for

pytestmark = pytest.mark.interop


def test_client_commands_over_mutual_tls(tmp_path: Path) -> None:
    files = make_tls_files(tmp_path / "tls")
    port = free_port()
    broker = BrokerProcess(
        tmp_path / "data", f"listeners=SSL://127.0.0.1:{port}", *ssl_settings(files), port=port
    ).start()
    try:
        settings = [f"-X{k}={v}" for k, v in confluent_ssl(files, files.client("cli")).items()]
        bootstrap = ["-b", broker.bootstrap]
        created = run(*settings, *bootstrap, "topics", "create", "secure", "--partitions", "2")
        assert created.returncode == 0, created
        produced = run(*settings, *bootstrap, "produce", "secure", "--partition", "0", stdin=b"one\ntwo\n")
        assert produced.returncode == 0, produced
        consumed = run(*settings, *bootstrap, "consume", "secure", "--from-beginning", "--max-messages", "2")
        assert consumed.returncode == 0, consumed
        assert consumed.stdout.split() == [b"one", b"two"]
        assert "authenticated as User:CN=cli,OU=x,O=y" in broker.log()
        # without the settings the same command fails in one line instead of hanging
        plain = run(*bootstrap, "topics", "list", timeout=120)
        assert_one_line_error(plain)
        assert_one_line_error(run("-X", "no-equals-sign", *bootstrap, "topics", "list"), "KEY=VALUE")
    finally:
        broker.stop()


SASL_USERS = {"admin": "admin-cli-pw", "ops": "ops-cli-pw"}
_CLOSED = re.compile(r"closing connection (\d+) from")
_AUTHENTICATED = re.compile(r"connection (\d+) from \S+ authenticated as User:admin")


def _unauthenticated(log: str, after: int) -> list[str]:
    """The lines closing a connection numbered above `after` that never authenticated."""
    authenticated = {int(m.group(1)) for m in _AUTHENTICATED.finditer(log)}
    return [
        line
        for line in log.splitlines()
        if (m := _CLOSED.search(line)) and int(m.group(1)) > after and int(m.group(1)) not in authenticated
    ]


def test_client_commands_connect_once_with_their_settings_on_a_sasl_listener(tmp_path: Path) -> None:
    """Issue 23: every client command makes its one client with every setting given (the global `-X`, a
    command's own `--command-config` / `-X`), so no stray client reaches a SASL listener unauthenticated
    (it would be closed unauthenticated, or answered ILLEGAL_SASL_STATE once it sent Metadata). Covers the
    confluent-kafka commands (acls, users, topics) and the kafka-python ones (txn, log-dirs). The broker
    logs at DEBUG, so every closed connection has a line."""
    data = tmp_path / "data"
    store_scram_users(data, SASL_USERS)
    port = free_port()
    broker = BrokerProcess(
        data,
        f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
        "sasl.enabled.mechanisms=SCRAM-SHA-256",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:admin",
        port=port,
        log_level="DEBUG",
    ).start()
    try:
        wait_for(lambda: _CLOSED.search(broker.full_log()))  # start()'s readiness probe
        probes = max(int(m.group(1)) for m in _CLOSED.finditer(broker.full_log()))
        admin = [f"{k}={v}" for k, v in scram_settings("admin", SASL_USERS["admin"]).items()]
        global_x = [x for item in admin for x in ("-X", item)]
        local_x = [x for item in admin for x in ("--command-config", item)]
        b = broker.bootstrap

        added = run("acls", "add", "--allow-principal", "User:ops", "--operation", "Read",
                    "--topic", "sasl-t", *local_x, bootstrap=b)  # fmt: skip
        assert added.returncode == 0, added
        listed = run("acls", "list", "--topic", "sasl-t", *local_x, bootstrap=b)
        assert listed.returncode == 0, listed
        assert "User:ops" in listed.out, listed.out
        assert "READ" in listed.out.upper(), listed.out
        users = run("users", "list", *global_x, bootstrap=b)  # the command's own -X
        assert users.returncode == 0, users
        assert {line.split()[0] for line in users.out_lines[1:]} == {"admin", "ops"}, users.out
        created = run(*global_x, "topics", "create", "sasl-t", "--partitions", "2", bootstrap=b)
        assert created.returncode == 0, created
        topics = run(*global_x, "topics", "list", bootstrap=b)
        assert topics.returncode == 0, topics
        assert "sasl-t" in topics.out_lines, topics
        txns = run(*global_x, "txn", "list", bootstrap=b)  # kafka-python underneath
        assert txns.returncode == 0, txns
        assert txns.out == "", txns
        dirs = run(*global_x, "log-dirs", "describe", "--topic", "sasl-t", bootstrap=b)
        assert dirs.returncode == 0, dirs
        assert sorted(line.split()[:2] for line in dirs.out_lines if line.startswith("sasl-t")) == [
            ["sasl-t", "0"],
            ["sasl-t", "1"],
        ], dirs.out
        # a setting kafka-python cannot take is one line, not a silent unauthenticated connection
        assert_one_line_error(
            run(*global_x, "-Xsocket.keepalive.enable=true", "txn", "list", bootstrap=b),
            "socket.keepalive.enable",
        )

        wait_for(lambda: "; 0 open" in broker.full_log().splitlines()[-1])  # every command's close logged
        log = broker.full_log()
        assert "ILLEGAL_SASL_STATE" not in log, log
        assert _unauthenticated(log, probes) == [], log
        assert len(_AUTHENTICATED.findall(log)) >= 7
    finally:
        broker.stop()
