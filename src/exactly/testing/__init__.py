"""Tools for running exactly's own processes: the integration tests, the verification harness, the
benchmarks and the demo use them at run time, so they ship in the package."""
