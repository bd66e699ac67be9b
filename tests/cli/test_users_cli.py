"""`exactly users` against a real broker (AlterUserScramCredentials / DescribeUserScramCredentials through
confluent-kafka) and offline with --data-dir (the first user, before the broker starts)."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Producer

from exactly.testing.processes import BrokerProcess, free_port
from tests.cli.helpers import assert_one_line_error, run_cli


def _scram_producer_works(port: int, mechanism: str, user: str, password: str) -> bool:
    producer = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            "message.timeout.ms": 10_000,
        }
    )
    producer.produce("users-cli", b"x", partition=0)
    return producer.flush(20) == 0


def test_first_user_offline_then_users_over_sasl(tmp_path: Path) -> None:
    data = tmp_path / "data"
    added = run_cli(
        "users", "add", "admin", "--password", "admin-pw-1", "--iterations", "8192", "--data-dir", str(data)
    )
    assert added.returncode == 0, added.stderr
    assert added.out_lines == ["user admin: SCRAM-SHA-256 credential stored (8192 iterations)"]
    assert "admin-pw-1" not in (data / "__cluster_metadata.log").read_text()
    port = free_port()
    with BrokerProcess(data, f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}", port=port) as broker:
        assert _scram_producer_works(port, "SCRAM-SHA-256", "admin", "admin-pw-1")
        as_admin = [
            "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=SCRAM-SHA-256",
            "-X", "sasl.username=admin", "-X", "sasl.password=admin-pw-1",
        ]  # fmt: skip
        result = run_cli(
            "users", "add", "alice", "-m", "SCRAM-SHA-512", "--password", "alice-pw-2", *as_admin,
            bootstrap=broker.bootstrap,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        listed = run_cli("users", "list", *as_admin, bootstrap=broker.bootstrap)
        assert listed.returncode == 0, listed.stderr
        rows = [line.split() for line in listed.out_lines]
        assert rows == [
            ["USER", "MECHANISM", "ITERATIONS"],
            ["admin", "SCRAM-SHA-256", "8192"],
            ["alice", "SCRAM-SHA-512", "4096"],
        ]
        assert _scram_producer_works(port, "SCRAM-SHA-512", "alice", "alice-pw-2")
        deleted = run_cli(
            "users", "delete", "alice", "-m", "SCRAM-SHA-512", *as_admin, bootstrap=broker.bootstrap
        )
        assert deleted.returncode == 0, deleted.stderr
        again = run_cli(
            "users", "delete", "alice", "-m", "SCRAM-SHA-512", *as_admin, bootstrap=broker.bootstrap
        )
        assert_one_line_error(
            again, "cannot delete SCRAM-SHA-512 credential of user 'alice'", "does not exist"
        )
        wrong = [*as_admin[:-1], "sasl.password=nope"]
        refused = run_cli("users", "list", *wrong, bootstrap=broker.bootstrap)
        assert_one_line_error(refused, "Authentication failed")
    offline = run_cli("users", "list", "--data-dir", str(data))
    assert [line.split() for line in offline.out_lines][1:] == [["admin", "SCRAM-SHA-256", "8192"]]


def test_bad_arguments_are_one_line(tmp_path: Path) -> None:
    data = str(tmp_path / "d")
    assert_one_line_error(
        run_cli("users", "add", "a", "-m", "MD5", "--password", "x", "--data-dir", data), "MD5"
    )
    assert_one_line_error(
        run_cli("users", "add", "a", "--iterations", "100", "--password", "x", "--data-dir", data), "4096"
    )
    assert_one_line_error(run_cli("users", "list", "--data-dir", str(tmp_path / "missing")), "does not exist")
