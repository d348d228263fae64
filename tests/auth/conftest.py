"""Auth stores on every supported database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lakefs_core.auth import AuthStore

SECRET_KEY = "a-test-encryption-key"


@pytest.fixture(params=["sqlite", "postgresql"])
def auth_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL of an empty database, once per backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'auth.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def store(auth_url: str) -> Iterator[AuthStore]:
    with AuthStore(auth_url, SECRET_KEY) as s:
        yield s
