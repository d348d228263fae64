"""The engine under test: a Graveler on each refstore x blockstore pair."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lakefs_core.block.base import BlockStore
from lakefs_core.graveler.graveler import Graveler
from lakefs_core.refstore.sql import SQLRefStore


@dataclass
class Env:
    graveler: Graveler
    repo: str
    namespace: str


@pytest.fixture(params=["sqlite", "postgres"])
def refstore_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'refs.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def env(refstore_url: str, blockstore_namespace: tuple[BlockStore, str],
        unique_name: str) -> Iterator[Env]:
    store, namespace = blockstore_namespace
    refstore = SQLRefStore(refstore_url)
    # small ranges so that tests exercise many range files
    g = Graveler(refstore, lambda _sid: store, range_options={"raggedness": 8})
    repo = "repo-" + unique_name.lower()
    g.create_repository(repo, namespace)
    yield Env(g, repo, namespace)
    refstore.close()
