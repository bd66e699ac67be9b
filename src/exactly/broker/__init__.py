"""The asyncio shell: the only package that touches sockets or the event loop (ARCHITECTURE invariant 1)."""
