"""What an import puts on a branch, through the engine: sources merged by destination
(the last source wins a path), each imported prefix's destination replaced, everything
else kept, overlapping destinations included."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakefs_core.block.local import LocalBlockStore
from lakefs_core.errors import DirtyBranchError, ValidationError
from lakefs_core.graveler.graveler import Graveler
from lakefs_core.graveler.importing import ImportPath, ImportPathType, import_records
from lakefs_core.graveler.model import AddressType
from lakefs_core.refstore.sql import SQLRefStore
from tests.graveler.support import entry

PREFIX, OBJECT = ImportPathType.COMMON_PREFIX, ImportPathType.OBJECT


@pytest.fixture
def engine(tmp_path: Path) -> tuple[Graveler, LocalBlockStore, Path]:
    src = tmp_path / "src"
    for rel in ["x/1", "x/2", "x/sub/3", "y/1", "y/9", "one"]:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(rel.encode())
    store = LocalBlockStore(str(tmp_path / "block"), allowed_external_prefixes=[str(src)],
                            import_enabled=True)
    g = Graveler(SQLRefStore(f"sqlite:///{tmp_path}/refs.db"), lambda _sid: store)
    g.create_repository("repo", "local://repo")
    return g, store, src


def test_sources_merge_by_destination_and_replace_their_prefixes(
        engine: tuple[Graveler, LocalBlockStore, Path]) -> None:
    g, store, src = engine
    for path in ["a/old", "a/b/old", "a/x-kept", "keep", "z/one-old"]:
        g.set_entry("repo", "main", path, entry(path))
    g.commit("repo", "main", "existing", "tester")
    paths = [ImportPath(f"local://{src}/x/", "a/", PREFIX),
             ImportPath(f"local://{src}/y/", "a/b/", PREFIX),  # inside the first
             ImportPath(f"local://{src}/one", "a/1", OBJECT)]  # last source wins a/1
    records = list(import_records(store, paths))
    assert [r.path for r in records] == ["a/1", "a/2", "a/b/1", "a/b/9", "a/sub/3"]
    first = records[0].entry
    assert first is not None and first.address == f"local://{src}/one"
    assert first.address_type is AddressType.FULL
    rm = g.ranges_for(g.refstore.get_repository("repo"))
    imported = rm.apply(rm.empty_metarange(), iter(records)).metarange_id
    rec = g.commit_import("repo", "main", imported, ["a/", "a/b/"], "import", "tester")
    listed = [r.path for r in g.iterate_entries("repo", rec.id)]
    assert listed == ["a/1", "a/2", "a/b/1", "a/b/9", "a/sub/3", "keep", "z/one-old"]
    assert rec.commit.parents and len(rec.commit.parents) == 1


def test_a_dirty_branch_refuses_the_commit(
        engine: tuple[Graveler, LocalBlockStore, Path]) -> None:
    g, store, src = engine
    rm = g.ranges_for(g.refstore.get_repository("repo"))
    imported = rm.apply(rm.empty_metarange(), import_records(
        store, [ImportPath(f"local://{src}/x/", "a/", PREFIX)])).metarange_id
    g.set_entry("repo", "main", "uncommitted", entry("uncommitted"))
    head = g.get_branch("repo", "main").commit_id
    with pytest.raises(DirtyBranchError):
        g.commit_import("repo", "main", imported, ["a/"], "import", "tester")
    assert g.get_branch("repo", "main").commit_id == head


def test_an_empty_prefix_is_an_error(engine: tuple[Graveler, LocalBlockStore, Path]) -> None:
    _, store, src = engine
    with pytest.raises(ValidationError, match="no objects under"):
        list(import_records(store, [ImportPath(f"local://{src}/nothing/", "a/", PREFIX)]))

