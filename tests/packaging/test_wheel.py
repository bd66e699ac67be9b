"""The package as a user installs it: `python -m build` makes the sdist and wheel, the wheel goes into a
fresh virtualenv without the dev extras, and its `exactly` command serves and drives a broker.

Nothing from this checkout is on the path of the installed commands (PYTHONPATH is removed, the working
directory is a temporary one), so a missing runtime dependency or an unpackaged module fails here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from exactly.testing.processes import free_port, wait_until_listening

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow]


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        env=_clean_env(),
        timeout=600,
    )
    return out


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with only the wheel (and its declared dependencies) installed; its bin dir."""
    home = tmp_path_factory.mktemp("venv")
    venv.create(home, with_pip=True)
    (wheel,) = dist.glob("exactly-*.whl")
    subprocess.run(
        [str(home / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        check=True,
        capture_output=True,
        env=_clean_env(),
        timeout=600,
    )
    return home / "bin"


def test_sdist_and_wheel_hold_the_package(dist: Path) -> None:
    (wheel,) = dist.glob("exactly-*.whl")
    (sdist,) = dist.glob("exactly-*.tar.gz")
    names = set(zipfile.ZipFile(wheel).namelist())
    for member in (
        "exactly/py.typed",
        "exactly/broker/server.py",
        "exactly/protocol/messages/fetch.py",
        "exactly/cli/main.py",
    ):
        assert member in names, member
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "Requires-Python: >=3.11\n" in text  # never capped
    assert "Requires-Dist: confluent-kafka" in text
    requires = [line for line in text.splitlines() if line.startswith("Requires-Dist: ")]
    test_tools = [line for line in requires if "hypothesis" in line or "pytest" in line or "mypy" in line]
    assert test_tools, requires
    assert all('extra == "dev"' in line for line in test_tools), test_tools
    with tarfile.open(sdist) as tar:
        sdist_names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"pyproject.toml", "src/exactly/broker/server.py", "README.md"} <= sdist_names


@pytest.fixture
def served(installed: Path, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    log = open(tmp_path / "broker.log", "wb")  # noqa: SIM115 (kept open for the child's lifetime)
    proc = subprocess.Popen(
        [str(installed / "exactly"), "serve", "--data-dir", str(tmp_path / "data"), "--listen", bootstrap],
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=_clean_env(),
    )
    try:
        wait_until_listening(proc, port, timeout=60, log_path=tmp_path / "broker.log")
        yield bootstrap
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
    assert proc.returncode == 0, (tmp_path / "broker.log").read_text(errors="replace")


def _exactly(bin_dir: Path, cwd: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [str(bin_dir / "exactly"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_clean_env(),
        timeout=120,
    )
    assert done.returncode == 0, f"exactly {' '.join(args)}: {done.stderr}"
    return done.stdout


def test_installed_cli_serves_and_drives_a_broker(installed: Path, served: str, tmp_path: Path) -> None:
    run = lambda *args, stdin=None: _exactly(installed, tmp_path, "-b", served, *args, stdin=stdin)  # noqa: E731
    run("topics", "create", "smoke", "--partitions", "2")
    assert "smoke" in run("topics", "list").split()
    run("produce", "smoke", stdin="one\ntwo\nthree\n")
    consumed = run("consume", "smoke", "--from-beginning", "--max-messages", "3", "--timeout", "60")
    assert sorted(consumed.split()) == ["one", "three", "two"]
    described = run("topics", "describe", "smoke", "--config-sources")
    assert "PartitionCount: 2" in described
    assert "cleanup.policy" in described  # every config with its source
    run("groups", "list")
    run("txn", "list")


def test_missing_client_library_is_one_readable_line() -> None:
    """The error reporter must not import the missing library a second time (it used to, and printed
    two tracebacks instead of one line)."""
    code = (
        "import sys; sys.modules['confluent_kafka'] = None; sys.argv = ['exactly', 'topics', 'list']; "
        "from exactly.cli.main import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=dict(os.environ)
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    expected = "error: this command needs the Python package 'confluent-kafka', not installed"
    assert lines[0].startswith(expected), lines
    assert "Traceback" not in done.stderr
