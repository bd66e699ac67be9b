"""The verification harness (`exactly verify`): real brokers and real clients under seeded faults, a
history of what every client saw, and a checker of the invariants in ARCHITECTURE.md."""
