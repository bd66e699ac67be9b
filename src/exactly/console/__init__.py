"""The read-only web console: what the broker is doing, for the people who run it.

Pure parts only: the views a page shows (`model`), the pages rendered from them (`pages`, Jinja2
templates and a small vanilla-JavaScript refresh loop shipped in this package), the record browser's
decoding (`records`), a classic member's assignment (`assignment`), live rates (`rates`) and the
basic-auth check against SCRAM credentials (`auth`). The broker serves it under /console/ of its
metrics listener (exactly.broker.console reads the broker's state into the views); docs/console.md.
"""
