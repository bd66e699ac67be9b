"""The optional compiled build: the modules mypyc compiles to C extensions, and which of them are loaded so.

`pip install .` installs pure Python, and that is what runs unless the package was built with
`EXACTLY_COMPILE=1` (setup.py; `make compiled`; docs/compiled.md). The list holds the modules a request
runs through most: the codecs of the hot APIs, record batches, storage, the transaction coordinator and
the broker's request path. Every module here must also stay correct as pure Python, which is what the
suite tests first; `make test` then runs the suites of these modules again against a compiled build.

This module is read by setup.py with `runpy` (no imports beyond the standard library)."""

from __future__ import annotations

import importlib
import importlib.machinery

COMPILED_MODULES: tuple[str, ...] = (
    "exactly.protocol.api",
    "exactly.protocol.primitives",
    "exactly.protocol.messages.add_offsets_to_txn",
    "exactly.protocol.messages.add_partitions_to_txn",
    "exactly.protocol.messages.end_txn",
    "exactly.protocol.messages.fetch",
    "exactly.protocol.messages.find_coordinator",
    "exactly.protocol.messages.init_producer_id",
    "exactly.protocol.messages.offset_commit",
    "exactly.protocol.messages.produce",
    "exactly.protocol.messages.txn_offset_commit",
    "exactly.protocol.messages.write_txn_markers",
    "exactly.records.batch",
    "exactly.records.builder",
    "exactly.records.control",
    "exactly.records.record",
    "exactly.records.varint",
    "exactly.storage.append_analysis",
    "exactly.storage.file_slice",
    "exactly.storage.index_file",
    "exactly.storage.leader_epoch",
    "exactly.storage.log",
    "exactly.storage.offset_index",
    "exactly.storage.producer_state",
    "exactly.storage.segment",
    "exactly.storage.snapshot",
    "exactly.storage.time_index",
    "exactly.storage.txn_index",
    "exactly.storage.validator",
    "exactly.txn.coordinator",
    "exactly.txn.decisions",
    "exactly.txn.markers",
    "exactly.txn.metadata",
    "exactly.txn.records",
    "exactly.txn.results",
    "exactly.txn.state",
    "exactly.broker.connection",
    "exactly.broker.dispatch",
    "exactly.broker.flusher",
    "exactly.broker.frame_stream",
    "exactly.broker.handling",
    "exactly.broker.marker_channel",
    "exactly.broker.replica_manager",
    "exactly.broker.transactions",
    "exactly.broker.handlers.add_partitions_to_txn",
    "exactly.broker.handlers.end_txn",
    "exactly.broker.handlers.fetch",
    "exactly.broker.handlers.init_producer_id",
    "exactly.broker.handlers.produce",
)


def compiled_modules() -> list[str]:
    """The modules of `COMPILED_MODULES` that this interpreter loads from a C extension (imports them)."""
    return [
        name
        for name in COMPILED_MODULES
        if (origin := importlib.import_module(name).__file__) is not None
        and origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    ]


def describe_build() -> str:
    """One phrase for the broker's start-up log: "pure Python" or "compiled with mypyc (N of M modules)"."""
    compiled = compiled_modules()
    if not compiled:
        return "pure Python"
    return f"compiled with mypyc ({len(compiled)} of {len(COMPILED_MODULES)} modules)"
