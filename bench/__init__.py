"""Benchmarks of the audit itself (not tests: nothing here asserts on time)."""
