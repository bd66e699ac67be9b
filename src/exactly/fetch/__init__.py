"""What the Fetch API keeps between requests: incremental fetch sessions (KIP-227), sans-IO."""
