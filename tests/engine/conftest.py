"""The engine under test: a Graveler on each refstore x blockstore pair (SQLite and
PostgreSQL with every blockstore, DynamoDB with the local and S3 ones)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lakefs_core.block.base import BlockStore
from lakefs_core.graveler.graveler import Graveler
from lakefs_core.refstore.base import RefStore
from lakefs_core.refstore.sql import SQLRefStore
from tests.conftest import BLOCKSTORE_NAMESPACES
from tests.refstore.conftest import open_dynamodb


@dataclass
class Env:
    graveler: Graveler
    repo: str
    namespace: str


PAIRS = [(db, ns) for db in ("sqlite", "postgres") for ns in BLOCKSTORE_NAMESPACES] + [
    ("dynamodb", "local_namespace"), ("dynamodb", "s3_namespace")]


@pytest.fixture(params=PAIRS, ids=lambda p: f"{p[0]}-{p[1].removesuffix('_namespace')}")
def env(request: pytest.FixtureRequest, tmp_path: Path, unique_name: str) -> Iterator[Env]:
    database, namespace_fixture = request.param
    store, namespace = request.getfixturevalue(namespace_fixture)
    refstore: RefStore
    if database == "dynamodb":
        refstore = open_dynamodb(request.getfixturevalue("moto_endpoint"), unique_name)
    elif database == "sqlite":
        refstore = SQLRefStore(f"sqlite:///{tmp_path / 'refs.db'}")
    else:
        refstore = SQLRefStore(request.getfixturevalue("pg_schema_url"))
    blockstore: BlockStore = store
    # small ranges so that tests exercise many range files
    g = Graveler(refstore, lambda _sid: blockstore, range_options={"raggedness": 8})
    repo = "repo-" + unique_name.lower()
    g.create_repository(repo, namespace)
    yield Env(g, repo, namespace)
    if database == "dynamodb":  # moto keeps tables in memory: drop the test's
        refstore.client.delete_table(TableName=unique_name)  # type: ignore[attr-defined]
    refstore.close()
