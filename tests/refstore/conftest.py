"""Refstore fixtures: every behaviour test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lakefs_core.refstore.sql import SQLRefStore


@pytest.fixture(params=["sqlite", "postgres"])
def refstore_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a fresh, empty database of each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'refstore.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def store(refstore_url: str) -> Iterator[SQLRefStore]:
    s = SQLRefStore(refstore_url)
    yield s
    s.close()
