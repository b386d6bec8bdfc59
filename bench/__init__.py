"""Benchmarks: each measures the project and its baseline side by side, in one run."""
