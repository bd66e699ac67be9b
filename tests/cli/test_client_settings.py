"""`exactly -X KEY=VALUE`: the client commands pass security settings through to their clients, so they
work against an SSL listener with mutual TLS (issue 13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from exactly.testing.processes import BrokerProcess, free_port
from tests.cli.helpers import assert_one_line_error
from tests.cli.helpers import run_cli as run
from tests.interop.tls_support import confluent_ssl, make_tls_files, ssl_settings

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
