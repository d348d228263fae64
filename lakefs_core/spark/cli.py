"""What the Spark job commands share: ``--option NAME=VALUE`` pairs, a session, a report.

The job commands (``python -m lakefs_core.spark.gc``, ``...backfill``,
``...examples.reproducible_training``) take the data source's option names as
``--option NAME=VALUE``, run on a SparkSession of their own (``--master``) unless
one is handed in, and print their report as JSON on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lakefs_core.spark.datasource import register

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def job_parser(prog: str, description: str | None) -> argparse.ArgumentParser:
    """A parser with ``--option NAME=VALUE`` (repeatable) and ``--master``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        help="a data source option (endpoint, credentials, storage)")
    parser.add_argument("--master", default="local[*]", help="the Spark master")
    return parser


def option_pairs(pairs: Sequence[str]) -> dict[str, str]:
    """``NAME=VALUE`` strings as a mapping.

    Raises:
        SystemExit: a string without ``=`` (a usage error).
    """
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SystemExit(f"expected NAME=VALUE, got {pair!r}")
        out[name] = value
    return out


@contextlib.contextmanager
def job_session(master: str, app: str, spark: SparkSession | None = None
                ) -> Iterator[SparkSession]:
    """``spark`` as given (left running), or a new session stopped at the end; either way
    with the ``lakefs`` format registered."""
    if spark is not None:
        register(spark)
        yield spark
        return
    from pyspark.sql import SparkSession

    session = SparkSession.builder.master(master).appName(app).getOrCreate()
    try:
        register(session)
        yield session
    finally:
        session.stop()


def print_report(report: Mapping[str, Any]) -> None:
    """The report as indented JSON on stdout."""
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
