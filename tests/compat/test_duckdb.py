"""DuckDB with httpfs (the ``duckdb-extension-httpfs`` wheel) against the gateway."""

from __future__ import annotations

from tests.compat.conftest import PYTHON, Target, python_client


def test_duckdb_httpfs_round_trip(target: Target) -> None:
    assert python_client(PYTHON, "duckdb_httpfs.py", target, "write").strip() == "ok"
    assert sorted(target.paths("main", "duck/")) == [
        "duck/big.parquet", *(f"duck/csv/part={n}/data_0.csv" for n in range(3))]
    sha = target.commit()
    assert python_client(PYTHON, "duckdb_httpfs.py", target, sha).strip() == "ok"
