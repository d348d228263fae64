"""Mirrors table configurations for the two-region tests: every backend, none skipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(params=["sqlite", "postgres", "dynamodb"])
def mirrors_database(request: pytest.FixtureRequest, tmp_path: Path,
                     unique_name: str) -> dict[str, Any]:
    if request.param == "sqlite":
        return {"type": "sqlite", "sqlite": {"path": str(tmp_path / "mirrors.db")}}
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")
        return {"type": "postgres", "postgres": {"connection_string": url}}
    endpoint = request.getfixturevalue("moto_endpoint")
    return {"type": "dynamodb", "dynamodb": {"table_name": f"mirrors-{unique_name}",
                                             "aws_region": "us-east-1",
                                             "endpoint_url": endpoint}}


@pytest.fixture
def sqlite_mirrors(tmp_path: Path) -> dict[str, Any]:
    return {"type": "sqlite", "sqlite": {"path": str(tmp_path / "mirrors.db")}}
