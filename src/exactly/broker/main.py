"""`exactly serve`: run the broker until SIGTERM or SIGINT, then shut down cleanly."""

from __future__ import annotations

import asyncio
import logging
import signal

import uvloop

import exactly.broker.handlers  # noqa: F401  (registers the handlers)
from exactly.broker.config import BrokerConfig
from exactly.broker.server import Broker


async def _serve(config: BrokerConfig) -> None:
    broker = Broker(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, broker.request_stop)
    await broker.start()
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
