"""Run the real `exactly` command in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

import pytest

from exactly.cli.main import main


@dataclass
class Result:
    returncode: int
    stdout: bytes
    stderr: str

    @property
    def out(self) -> str:
        return self.stdout.decode()

    @property
    def out_lines(self) -> list[str]:
        return self.out.splitlines()

    @property
    def err_lines(self) -> list[str]:
        return self.stderr.splitlines()


def run_cli(
    *args: str, bootstrap: str | None = None, stdin: bytes | None = None, timeout: float = 60.0
) -> Result:
    """`python -m exactly ARGS...`; `bootstrap` goes in through $EXACTLY_BOOTSTRAP_SERVER."""
    env = {k: v for k, v in os.environ.items() if k != "EXACTLY_BOOTSTRAP_SERVER"}
    if bootstrap is not None:
        env["EXACTLY_BOOTSTRAP_SERVER"] = bootstrap
    env["COLUMNS"] = "200"
    proc = subprocess.run(
        [sys.executable, "-m", "exactly", *args],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr.decode(errors="replace"))


def assert_one_line_error(result: Result, *fragments: str) -> str:
    """Non-zero exit, exactly one `error: ...` line on stderr containing `fragments`, no traceback."""
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr, result
    assert b"Traceback" not in result.stdout, result
    lines = result.err_lines
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("error: "), line
    for fragment in fragments:
        assert fragment in line, line
    return line


def run_in_process(capsys: pytest.CaptureFixture[str], *args: str) -> Result:
    """`main()` in this process (fast; the same code path as the installed script)."""
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    captured = capsys.readouterr()
    code = exit_info.value.code
    return Result(code if isinstance(code, int) else 1, captured.out.encode(), captured.err)
