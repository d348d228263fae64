"""Spark on versioned data: the ``lakefs`` data source and jobs that outgrow one machine.

``register(spark)`` makes ``format("lakefs")`` available (see
:mod:`lakefs_core.spark.datasource` for its options). Garbage collection
(:mod:`.gc`) and mirror backfill/validation (:mod:`.backfill`) run as Spark jobs over
the Parquet range files. Workers need ``PYSPARK_PYTHON`` set to this interpreter.

pyspark is an optional dependency (``pip install 'lakefs-mirror[spark]'``): this
package imports it only when a name that needs it is first used.
"""

from __future__ import annotations

import importlib
from typing import Any

from lakefs_core.spark.client import CommitInfo, LakeFSClient, RepositoryInfo, ServerRequestError
from lakefs_core.spark.options import ServerOptions, StorageOptions

#: names of the data source module, imported on first use (they need pyspark)
_DATASOURCE_NAMES = frozenset({"FORMAT_NAME", "LakeFSDataSource", "LakeFSReader",
                               "LakeFSWriter", "ReadPlan", "plan_read", "register"})
SPARK_EXTRA_HINT = "pyspark is not installed: pip install 'lakefs-mirror[spark]'"


def require_pyspark() -> None:
    """Raise a clear ImportError when pyspark is missing."""
    try:
        importlib.import_module("pyspark")
    except ImportError as e:
        raise ImportError(SPARK_EXTRA_HINT) from e


def __getattr__(name: str) -> Any:
    if name in _DATASOURCE_NAMES:
        require_pyspark()
        return getattr(importlib.import_module("lakefs_core.spark.datasource"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

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
