"""Benchmarks: commands that print figures (never timed assertions)."""
