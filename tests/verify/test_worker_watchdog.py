"""The worker's watchdog: a blocking client call that overstays its own timeout (librdkafka#5456) ends the
worker process with EXIT_STUCK, so that the runner starts its next incarnation; a call that returns in
time does not."""

from __future__ import annotations

import subprocess
import sys
import time

from exactly.verify.worker import EXIT_STUCK

PROGRAM = """
import sys, time
from exactly.verify.worker import Watchdog
Watchdog.CALL_GRACE_S = 0.5
w = Watchdog()
with w.call("quick_call", 0.5):
    time.sleep(0.2)
print("quick call survived", flush=True)
with w.call("stuck_call", 0.5):
    time.sleep(float(sys.argv[1]))
print("stuck call survived", flush=True)
"""


def test_a_call_stuck_past_its_timeout_ends_the_worker() -> None:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, "60"], capture_output=True, text=True, timeout=50, check=False
    )
    assert done.returncode == EXIT_STUCK, done.stderr
    assert "quick call survived" in done.stdout
    assert "stuck call survived" not in done.stdout
    assert "stuck_call did not return 0.5 s after its timeout: exiting" in done.stderr
    assert "in _watch" in done.stderr  # the stacks were dumped
    assert time.monotonic() - started < 40


def test_calls_that_return_in_time_do_not_end_the_worker() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, "0.1"], capture_output=True, text=True, timeout=50, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["quick call survived", "stuck call survived"]
