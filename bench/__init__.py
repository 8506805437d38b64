"""Benchmarks (scripts, not tests): run as `python -m bench.<name>`."""
