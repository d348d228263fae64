"""Imported first by the benchmarks that time the engine in their own process: the
allocator settings the server and the replication service run with (see
``lakefs_core.memory``), made before Arrow loads, so that the figures are the
product's."""

from lakefs_core.memory import tune_allocator

tune_allocator()
