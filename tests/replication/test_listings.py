"""Page sizes of the sidecar's own listings: list_mirrors_page_size (the mirrors
table)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from lakefs_testing.regions import (
    ORG,
    two_regions,
)
from mirrors_db import open_mirrors_table
from mirrors_db.models import MirrorSpec
from replication.config import load_replication_config
from replication.sidecar import Sidecar
from tests.replication.settings import configure


@contextmanager
def mirrors_table_selects() -> Iterator[list[str]]:
    """The SELECT statements sent to the mirrors table meanwhile (by any engine)."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and \
                "FROM mirrors_db_mirrors" in statement:
            seen.append(statement)

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", record)


def test_mirrors_of_a_repository_are_listed_by_list_mirrors_page_size(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    """A ref move in the source region reaches every mirror, a page of one at a time."""
    with two_regions(tmp_path, sqlite_mirrors, sidecars=False) as (east, _west):
        configure(east, list_mirrors_page_size=1)
        config = load_replication_config(str(east.config_path), env={})
        with open_mirrors_table(sqlite_mirrors) as table:
            for i in range(3):
                table.create_mirror(MirrorSpec(
                    organization_id=ORG, name=f"m{i}", source_region="east",
                    source_repository="src", destination_region="west",
                    storage_namespace=f"local://m{i}"))
            sidecar = Sidecar(config, table=table)
            try:
                with mirrors_table_selects() as selects:
                    told = sidecar.on_ref_events([{"repository": "src"}], None)
            finally:
                sidecar.stop()
    assert told == 3
    assert len(selects) >= 3  # one mirror a page
