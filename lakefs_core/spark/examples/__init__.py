"""Runnable example pipelines (``python -m lakefs_core.spark.examples.<name>``)."""
