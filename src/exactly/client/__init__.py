"""Small synchronous clients of exactly's own protocol extensions (used by the Spark data source)."""
