"""polars against the gateway, through its own object-store client."""

from __future__ import annotations

from tests.compat.conftest import PYTHON, Target, python_client


def test_polars_round_trip(target: Target) -> None:
    assert python_client(PYTHON, "polars_cloud.py", target, "write").strip() == "ok"
    assert sorted(target.paths("main", "pl")) == [
        "pl-big/all.parquet", *(f"pl/part-{n}.parquet" for n in range(3))]
    sha = target.commit()
    assert python_client(PYTHON, "polars_cloud.py", target, sha).strip() == "ok"
