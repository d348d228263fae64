"""Listings over 2,500 mirrors: every mirror exactly once, in id order, page by page."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mirrors_db import Mirror, MirrorsTable, MirrorState
from tests.mirrors_db.conftest import ORG
from tests.mirrors_db.test_table import collect

COUNT = 2500


def make_mirrors() -> list[Mirror]:
    now = datetime.now(UTC)
    states = list(MirrorState)
    return [
        Mirror(
            organization_id=ORG,
            id=f"m{i:05d}",
            name=f"mirror-{i}",
            source_region="us-east-1",
            source_repository=f"repo-{i % 5}",
            destination_region=f"region-{i % 4}",
            storage_namespace=f"s3://dest/{i}",
            state=states[i % len(states)],
            error="",
            created_at=now,
            updated_at=now,
            version=1 + i % 3,
        )
        for i in range(COUNT)
    ]


# moto answers a DynamoDB query at about 2 ms per returned item, so the DynamoDB
# variant takes ~25 s here (SQLite and PostgreSQL take ~1 s).
@pytest.mark.parametrize("mirrors_config", [
    "sqlite", "postgres", pytest.param("dynamodb", marks=pytest.mark.slow),
], indirect=True)
def test_listings_over_2500_mirrors(table: MirrorsTable) -> None:
    mirrors = make_mirrors()
    table.import_mirrors(mirrors)
    ids = [m.id for m in mirrors]

    # the configured page size (list_mirrors_page_size, default 1000)
    assert collect(table.list_mirrors, organization_id=ORG) == (ids, 3)
    first = table.list_mirrors(ORG, page_size=1)
    assert first.mirrors == [mirrors[0]] and first.has_more

    by_source, pages = collect(table.list_mirrors_by_source, organization_id=ORG,
                               source_region="us-east-1", source_repository="repo-3",
                               page_size=200)
    assert (by_source, pages) == ([m.id for m in mirrors if m.source_repository == "repo-3"], 3)

    by_region, pages = collect(table.list_mirrors_by_destination, organization_id=ORG,
                               destination_region="region-1", page_size=250)
    assert (by_region, pages) == (
        [m.id for m in mirrors if m.destination_region == "region-1"], 3)
