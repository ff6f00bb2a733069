"""The performance suite: `python -m bench.run [--quick]` (see bench/README.md)."""
