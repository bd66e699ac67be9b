"""`exactly serve`: run the broker until SIGTERM or SIGINT, then shut down cleanly."""

from __future__ import annotations

import asyncio
import gc
import logging
import resource
import signal

import uvloop

import exactly.broker.handlers  # noqa: F401  (registers the handlers)
from exactly import __version__
from exactly.broker.config import BrokerConfig
from exactly.broker.server import Broker
from exactly.compiled import describe_build
from exactly.storage.file_handles import HANDLES


def raise_open_file_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit (as Kafka's packaging advises for brokers); returns
    (before, after). Partition logs and connections share this budget."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return soft, soft
        return soft, target
    return soft, soft


# The cyclic garbage collector's thresholds (CPython's defaults: 700, 10, 10). A sessionless Fetch of
# 100,000 partitions (librdkafka's) holds a million objects until its response is written; with the
# defaults they set off collections of the whole heap (every partition's log, index and producer state)
# so often that 4 of 5 samples of the broker were in gc_collect_main; with these, 1 in 6. Garbage without
# cycles is freed by reference counting as before.
GC_THRESHOLDS = (70_000, 20, 100)


def tune_garbage_collector() -> None:
    """Set GC_THRESHOLDS and move what start-up built (modules, cluster metadata, the coordinators'
    state; partition logs load later, lazily) out of the collector's sight (`gc.freeze`): it lives as
    long as the broker, and a full collection need not walk it."""
    gc.set_threshold(*GC_THRESHOLDS)
    gc.freeze()


async def _serve(config: BrokerConfig) -> None:
    before, after = raise_open_file_limit()
    broker = Broker(config)  # raises (one `error:` line) on a corrupt data directory: nothing logged before
    logging.getLogger("exactly.broker").info("exactly %s, %s", __version__, describe_build())
    logging.getLogger("exactly.broker").info(
        "open-file limit %d%s: %d segment files at once (an LRU, exactly.log.max.open.files; indexes hold "
        "none at rest), %d connections (max.connections and the limit's share), the rest for files opened "
        "for a moment",
        after,
        f" (raised from {before})" if after != before else "",
        HANDLES.budget,
        broker.connection_slots.capacity,
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, broker.request_stop)
    await broker.start()
    tune_garbage_collector()
    print(f"exactly listening on {config.listen[0]}:{broker.port}", flush=True)
    try:
        await broker.serve_until_stopped()
    finally:
        await broker.stop()


def serve(config: BrokerConfig, log_level: str = "INFO") -> None:
    """`log_level` is the broker's own (`exactly.*`) loggers' level; other libraries log at INFO."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("exactly").setLevel(log_level.upper())
    uvloop.run(_serve(config))
