"""Spark on versioned data: the ``lakefs`` data source and jobs that outgrow one machine.

``register(spark)`` makes ``format("lakefs")`` available (see
:mod:`lakefs_core.spark.datasource` for its options). Garbage collection
(:mod:`.gc`) and mirror backfill/validation (:mod:`.backfill`) run as Spark jobs over
the Parquet range files. Workers need ``PYSPARK_PYTHON`` set to this interpreter.
"""

from __future__ import annotations

from lakefs_core.spark.client import CommitInfo, LakeFSClient, RepositoryInfo, ServerRequestError
from lakefs_core.spark.datasource import (
    FORMAT_NAME,
    LakeFSDataSource,
    LakeFSReader,
    LakeFSWriter,
    ReadPlan,
    plan_read,
    register,
)
from lakefs_core.spark.options import ServerOptions, StorageOptions

__all__ = [
    "FORMAT_NAME",
    "CommitInfo",
    "LakeFSClient",
    "LakeFSDataSource",
    "LakeFSReader",
    "LakeFSWriter",
    "ReadPlan",
    "RepositoryInfo",
    "ServerOptions",
    "ServerRequestError",
    "StorageOptions",
    "plan_read",
    "register",
]
