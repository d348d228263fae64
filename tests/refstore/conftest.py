"""Refstore fixtures: every behaviour test runs on SQLite, PostgreSQL and DynamoDB (moto)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lakefs_core.refstore.base import RefStore
from lakefs_core.refstore.sql import SQLRefStore
from lakefs_testing.servers import MOTO_ENV

#: opens another handle on the test's database; ``page_size`` = rows (items) per page
OpenStore = Callable[..., RefStore]


def open_dynamodb(endpoint: str, table: str, page_size: int = 1000) -> RefStore:
    from lakefs_core.refstore.dynamodb import DynamoDBRefStore

    return DynamoDBRefStore(table, endpoint=endpoint, region=MOTO_ENV["AWS_DEFAULT_REGION"],
                            access_key_id=MOTO_ENV["AWS_ACCESS_KEY_ID"],
                            secret_access_key=MOTO_ENV["AWS_SECRET_ACCESS_KEY"],
                            scan_limit=page_size)


@pytest.fixture(params=["sqlite", "postgres", "dynamodb"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path,
               unique_name: str) -> Iterator[OpenStore]:
    """Opens stores on one fresh, empty database of each backend (closed at the end)."""
    opened: list[RefStore] = []
    if request.param == "dynamodb":
        endpoint: str = request.getfixturevalue("moto_endpoint")

        def open_one(page_size: int = 1000) -> RefStore:
            opened.append(open_dynamodb(endpoint, unique_name, page_size))
            return opened[-1]
    else:
        url = (f"sqlite:///{tmp_path / 'refstore.db'}" if request.param == "sqlite"
               else request.getfixturevalue("pg_schema_url"))

        def open_one(page_size: int = 1000) -> RefStore:
            opened.append(SQLRefStore(url, page_size=page_size))
            return opened[-1]

    yield open_one
    if request.param == "dynamodb" and opened:  # moto keeps tables in memory: drop it
        opened[0].client.delete_table(TableName=unique_name)  # type: ignore[attr-defined]
    for s in opened:
        s.close()


@pytest.fixture
def store(open_store: OpenStore) -> RefStore:
    return open_store()
