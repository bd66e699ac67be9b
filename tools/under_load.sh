#!/usr/bin/env bash
# Run a command while LOAD busy-loop processes (default 2) compete for the CPU, as a loaded 2-core CI
# machine would: `tools/under_load.sh .venv/bin/pytest -q`. The busy loops always end with the command.
set -euo pipefail
load="${LOAD:-2}"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT INT TERM
for _ in $(seq "$load"); do
    python3 -c 'while True: pass' &
    pids+=("$!")
done
"$@"
