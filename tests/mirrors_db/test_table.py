"""The mirrors table contract, the same on SQLite, PostgreSQL and DynamoDB."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import boto3
import pytest
import sqlalchemy as sa

from lakefs_core.errors import AlreadyExistsError, ConflictError, NotFoundError
from mirrors_db import (
    BranchProgressNotFoundError,
    InvalidMirrorArgumentError,
    InvalidStateTransitionError,
    LeaseHeldError,
    LeaseLostError,
    MalformedRowError,
    MirrorBranch,
    MirrorExistsError,
    MirrorNotFoundError,
    MirrorsTable,
    MirrorState,
    VersionConflictError,
    open_mirrors_table,
)
from mirrors_db.models import MAX_ERROR_LENGTH
from mirrors_db.sql import postgres_url
from tests.mirrors_db.conftest import ORG, ManualClock, config_for, spec

S = MirrorState


def advance(table: MirrorsTable, mirror_id: str, *states: MirrorState) -> Any:
    """Walk a mirror through ``states`` with CAS updates; return the last row."""
    current = table.get_mirror(ORG, mirror_id)
    for state in states:
        current = table.update_mirror(current.with_state(state))
    return current


# --- create / get ----------------------------------------------------------------------
def test_create_then_get_returns_the_same_row(table: MirrorsTable, clock: ManualClock) -> None:
    created = table.create_mirror(spec(name="analytics", storage_namespace="s3://b/analytics"))
    assert created.state is S.CREATING
    assert created.version == 1
    assert created.error == ""
    assert created.created_at == created.updated_at
    assert abs((created.created_at - clock()).total_seconds()) < 60
    got = table.get_mirror(ORG, created.id)
    assert got == created
    assert (got.name, got.storage_namespace) == ("analytics", "s3://b/analytics")


def test_storage_id_is_kept_and_defaults_to_the_default_store(table: MirrorsTable) -> None:
    on_store = table.create_mirror(spec(storage_id="azure-analytics"))
    default = table.create_mirror(spec())
    assert table.get_mirror(ORG, on_store.id).storage_id == "azure-analytics"
    assert table.get_mirror(ORG, default.id).storage_id == ""
    moved = table.update_mirror(table.get_mirror(ORG, on_store.id).with_state(S.ACTIVE))
    assert moved.storage_id == "azure-analytics"
    listed = {m.id: m.storage_id for m in table.list_mirrors(ORG).mirrors}
    assert listed == {on_store.id: "azure-analytics", default.id: ""}
    with pytest.raises(InvalidMirrorArgumentError, match="storage_id"):
        table.create_mirror(spec(storage_id="a#b"))


def test_get_missing_mirror_raises_not_found(table: MirrorsTable) -> None:
    with pytest.raises(MirrorNotFoundError) as info:
        table.get_mirror(ORG, "nope")
    assert isinstance(info.value, NotFoundError)
    assert "nope" in str(info.value)


def test_mirror_id_is_unique(table: MirrorsTable) -> None:
    first = table.create_mirror(spec())
    with pytest.raises(MirrorExistsError, match="id"):
        table.create_mirror(spec(id=first.id))


def test_name_is_unique_per_destination_region(table: MirrorsTable) -> None:
    first = table.create_mirror(spec(name="dr"))
    with pytest.raises(MirrorExistsError) as info:
        table.create_mirror(spec(name="dr", source_repository="other-repo"))
    assert isinstance(info.value, AlreadyExistsError)
    assert first.id in str(info.value)
    # the same name is fine in another region and in another organization
    table.create_mirror(spec(name="dr", destination_region="eu-west-1"))
    table.create_mirror(spec(org="other-org", name="dr"))


def test_storage_namespace_is_unique_per_organization(table: MirrorsTable) -> None:
    first = table.create_mirror(spec(storage_namespace="s3://bucket/shared"))
    with pytest.raises(MirrorExistsError, match="namespace") as info:
        table.create_mirror(spec(storage_namespace="s3://bucket/shared",
                                 destination_region="eu-west-1"))
    assert first.id in str(info.value)
    table.create_mirror(spec(org="other-org", storage_namespace="s3://bucket/shared"))


def test_a_failed_create_writes_nothing(table: MirrorsTable) -> None:
    table.create_mirror(spec(name="taken"))
    clash = spec(name="taken", storage_namespace="s3://bucket/fresh")
    with pytest.raises(MirrorExistsError):
        table.create_mirror(clash)
    with pytest.raises(MirrorNotFoundError):
        table.get_mirror(ORG, clash.id)
    # the namespace of the refused mirror was not reserved either
    table.create_mirror(spec(storage_namespace="s3://bucket/fresh"))


def test_deleted_state_frees_name_and_namespace(table: MirrorsTable) -> None:
    old = table.create_mirror(spec(name="reuse", storage_namespace="s3://b/reuse"))
    advance(table, old.id, S.ACTIVE, S.DELETING, S.DELETED)
    new = table.create_mirror(spec(name="reuse", storage_namespace="s3://b/reuse"))
    assert new.id != old.id
    assert table.get_mirror(ORG, old.id).state is S.DELETED
    with pytest.raises(MirrorExistsError):
        table.create_mirror(spec(name="reuse"))


@pytest.mark.parametrize("field,value", [
    ("organization_id", "a#b"), ("name", ""), ("destination_region", "us#1"),
    ("source_repository", "x" * 300), ("storage_namespace", "s3://b/\nx"),
])
def test_bad_identifiers_are_refused(table: MirrorsTable, field: str, value: str) -> None:
    with pytest.raises(InvalidMirrorArgumentError):
        table.create_mirror(spec(**{field: value}))


# --- the state machine -----------------------------------------------------------------
def test_state_machine_happy_path_bumps_versions(table: MirrorsTable) -> None:
    m = table.create_mirror(spec())
    active = table.update_mirror(m.with_state(S.ACTIVE))
    assert (active.state, active.version) == (S.ACTIVE, 2)
    assert active.updated_at >= m.updated_at
    deleting = table.update_mirror(active.with_state(S.DELETING))
    deleted = table.update_mirror(deleting.with_state(S.DELETED))
    assert (deleted.state, deleted.version) == (S.DELETED, 4)
    assert table.get_mirror(ORG, m.id) == deleted


@pytest.mark.parametrize("path,illegal", [
    ((), S.DELETED),                       # creating -> deleted skips deleting
    ((S.ACTIVE,), S.CREATING),
    ((S.FAILED,), S.ACTIVE),               # a failed mirror can only be deleted
    ((S.ACTIVE, S.DELETING), S.ACTIVE),
    ((S.ACTIVE, S.DELETING, S.DELETED), S.DELETING),
])
def test_illegal_transitions_are_refused_by_the_table(
    table: MirrorsTable, path: tuple[MirrorState, ...], illegal: MirrorState
) -> None:
    m = table.create_mirror(spec())
    current = advance(table, m.id, *path)
    with pytest.raises(InvalidStateTransitionError):
        current.with_state(illegal)
    # bypass the local check: the write itself must refuse it
    with pytest.raises(InvalidStateTransitionError) as info:
        table.update_mirror(replace(current, state=illegal))
    assert isinstance(info.value, ConflictError)
    assert (info.value.current, info.value.requested) == (current.state.value, illegal.value)
    assert table.get_mirror(ORG, m.id) == current


def test_failed_keeps_error_text_and_can_be_deleted(table: MirrorsTable) -> None:
    m = table.create_mirror(spec())
    failed = table.update_mirror(m.with_state(S.FAILED, "bucket not found"))
    assert table.get_mirror(ORG, m.id).error == "bucket not found"
    again = table.update_mirror(failed.with_state(S.FAILED, "x" * (MAX_ERROR_LENGTH + 50)))
    assert len(again.error) == MAX_ERROR_LENGTH
    assert table.get_mirror(ORG, m.id).error == again.error
    deleting = table.update_mirror(again.with_state(S.DELETING))
    assert deleting.error == ""
    assert table.get_mirror(ORG, m.id).error == ""


def test_update_with_a_stale_version_loses(table: MirrorsTable) -> None:
    m = table.create_mirror(spec())
    table.update_mirror(m.with_state(S.ACTIVE))
    with pytest.raises(VersionConflictError) as info:
        table.update_mirror(m.with_state(S.FAILED, "late"))
    assert isinstance(info.value, ConflictError)
    assert table.get_mirror(ORG, m.id).state is S.ACTIVE


def test_update_of_a_missing_mirror_raises_not_found(table: MirrorsTable) -> None:
    m = table.create_mirror(spec())
    table.delete_mirror(ORG, m.id)
    with pytest.raises(MirrorNotFoundError):
        table.update_mirror(m.with_state(S.ACTIVE))


def test_update_never_rewrites_the_immutable_fields(table: MirrorsTable) -> None:
    m = table.create_mirror(spec(name="keep"))
    tampered = replace(m.with_state(S.ACTIVE), name="changed", storage_namespace="s3://x/y")
    stored = table.update_mirror(tampered)
    assert stored.name == "keep"
    assert table.get_mirror(ORG, m.id).name == "keep"
    assert table.get_mirror(ORG, m.id).storage_namespace == m.storage_namespace


# --- delete -------------------------------------------------------------------------------
def test_delete_mirror_removes_it_with_its_branches(table: MirrorsTable) -> None:
    m = table.create_mirror(spec(name="gone", storage_namespace="s3://b/gone"))
    keep = table.create_mirror(spec())
    for branch in ("main", "dev"):
        table.put_branch_progress(MirrorBranch(ORG, m.id, branch, source_head="c1"))
    table.put_branch_progress(MirrorBranch(ORG, keep.id, "main"))
    table.delete_mirror(ORG, m.id, expected_version=m.version)
    with pytest.raises(MirrorNotFoundError):
        table.get_mirror(ORG, m.id)
    assert table.list_branch_progress(ORG, m.id) == []
    assert [p.branch for p in table.list_branch_progress(ORG, keep.id)] == ["main"]
    # deleting a live mirror frees its name and namespace too
    table.create_mirror(spec(name="gone", storage_namespace="s3://b/gone"))


def test_delete_mirror_checks_version_and_existence(table: MirrorsTable) -> None:
    m = table.create_mirror(spec())
    table.update_mirror(m.with_state(S.ACTIVE))
    with pytest.raises(VersionConflictError):
        table.delete_mirror(ORG, m.id, expected_version=m.version)
    assert table.get_mirror(ORG, m.id).state is S.ACTIVE
    with pytest.raises(MirrorNotFoundError):
        table.delete_mirror(ORG, "missing")


# --- listing ------------------------------------------------------------------------------
def collect(fetch: Any, **kwargs: Any) -> tuple[list[str], int]:
    """Follow page tokens; return ids and the number of pages."""
    ids: list[str] = []
    token, pages = None, 0
    while True:
        page = fetch(page_token=token, **kwargs)
        pages += 1
        ids += [m.id for m in page.mirrors]
        token = page.next_page_token
        if token is None:
            return ids, pages


def test_listings_page_through_in_id_order(table: MirrorsTable) -> None:
    made = [table.create_mirror(spec(source_repository=f"repo-{i % 2}",
                                     destination_region=f"region-{i % 3}"))
            for i in range(7)]
    table.create_mirror(spec(org="other-org"))
    all_ids = sorted(m.id for m in made)
    assert collect(table.list_mirrors, organization_id=ORG, page_size=3) == (all_ids, 3)
    first = table.list_mirrors(ORG, page_size=7)
    assert [m.id for m in first.mirrors] == all_ids and not first.has_more
    assert first.mirrors[0] == table.get_mirror(ORG, all_ids[0])

    by_repo, _ = collect(table.list_mirrors_by_source, organization_id=ORG,
                         source_region="us-east-1", source_repository="repo-1", page_size=2)
    assert by_repo == sorted(m.id for m in made if m.source_repository == "repo-1")
    by_region, _ = collect(table.list_mirrors_by_destination, organization_id=ORG,
                           destination_region="region-0", page_size=1)
    assert by_region == sorted(m.id for m in made if m.destination_region == "region-0")
    assert table.list_mirrors_by_source(ORG, "us-east-1", "no-such-repo").mirrors == []


def test_list_uses_the_configured_page_size(mirrors_config: dict[str, Any]) -> None:
    from mirrors_db import open_mirrors_table

    with open_mirrors_table({**mirrors_config, "list_mirrors_page_size": 2}) as small:
        for _ in range(3):
            small.create_mirror(spec())
        page = small.list_mirrors(ORG)
        assert len(page.mirrors) == 2 and page.has_more


def test_listing_rejects_bad_tokens_and_sizes(table: MirrorsTable) -> None:
    with pytest.raises(InvalidMirrorArgumentError):
        table.list_mirrors(ORG, page_token="%%%")
    for size in (0, 10_001):
        with pytest.raises(InvalidMirrorArgumentError):
            table.list_mirrors(ORG, page_size=size)


# --- branch progress ---------------------------------------------------------------------
def test_branch_progress_create_update_with_cas(table: MirrorsTable) -> None:
    m = table.create_mirror(spec())
    blank = MirrorBranch(ORG, m.id, "main")
    created = table.put_branch_progress(replace(blank, source_head="c1", pending_commit="c1",
                                                missing_objects=3, missing_ranges=1))
    assert created.version == 1
    assert table.get_branch_progress(ORG, m.id, "main") == created
    with pytest.raises(VersionConflictError):
        table.put_branch_progress(blank)  # creating it twice
    promoted = table.put_branch_progress(replace(
        created, pending_commit=None, promoted_commit="c1", promoted_at=created.updated_at,
        missing_objects=0, missing_ranges=0))
    assert promoted.version == 2
    stored = table.get_branch_progress(ORG, m.id, "main")
    assert stored == promoted
    assert (stored.pending_commit, stored.promoted_commit) == (None, "c1")
    with pytest.raises(VersionConflictError):
        table.put_branch_progress(replace(created, error="stale writer"))
    assert table.get_branch_progress(ORG, m.id, "main") == promoted


def test_branch_progress_needs_a_live_mirror(table: MirrorsTable) -> None:
    with pytest.raises(MirrorNotFoundError):
        table.put_branch_progress(MirrorBranch(ORG, "missing", "main"))
    m = table.create_mirror(spec())
    advance(table, m.id, S.DELETING, S.DELETED)
    with pytest.raises(MirrorNotFoundError):
        table.put_branch_progress(MirrorBranch(ORG, m.id, "main"))


def test_branch_progress_list_get_delete(table: MirrorsTable) -> None:
    m = table.create_mirror(spec())
    rows = {b: table.put_branch_progress(MirrorBranch(ORG, m.id, b, source_head=f"h-{b}"))
            for b in ("main", "feature/x#1", "dev")}
    assert table.list_branch_progress(ORG, m.id) == [rows["dev"], rows["feature/x#1"],
                                                     rows["main"]]
    with pytest.raises(BranchProgressNotFoundError):
        table.get_branch_progress(ORG, m.id, "nope")
    with pytest.raises(VersionConflictError):
        table.delete_branch_progress(ORG, m.id, "dev", expected_version=7)
    table.delete_branch_progress(ORG, m.id, "dev", expected_version=1)
    with pytest.raises(BranchProgressNotFoundError):
        table.delete_branch_progress(ORG, m.id, "dev", expected_version=1)
    with pytest.raises(BranchProgressNotFoundError):
        table.put_branch_progress(rows["dev"])  # updating a removed row
    assert [p.branch for p in table.list_branch_progress(ORG, m.id)] == ["feature/x#1", "main"]


def test_every_mirrors_progress_is_listed_in_pages(table: MirrorsTable) -> None:
    mirrors = [table.create_mirror(spec()) for _ in range(3)]
    rows = {(m.id, b): table.put_branch_progress(MirrorBranch(ORG, m.id, b, source_head=b))
            for m in mirrors for b in ("main", "feature/x#1", "dev", "a b")}
    other = table.create_mirror(spec(org="other-org"))
    table.put_branch_progress(MirrorBranch("other-org", other.id, "main"))
    seen: list[MirrorBranch] = []
    token: str | None = None
    pages = 0
    while True:
        page = table.list_all_branch_progress(ORG, page_token=token, page_size=5)
        pages += 1
        assert len(page.rows) <= 5
        seen += page.rows
        if page.next_page_token is None:
            break
        token = page.next_page_token
    assert pages == 3
    assert sorted(((p.mirror_id, p.branch), p) for p in seen) == sorted(rows.items())
    assert table.list_all_branch_progress(ORG).rows == seen  # one page, same order
    with pytest.raises(InvalidMirrorArgumentError):
        table.list_all_branch_progress(ORG, page_token="not-a-token")


# --- leases --------------------------------------------------------------------------------
def test_lease_is_exclusive_until_it_expires(table: MirrorsTable, clock: ManualClock) -> None:
    a = table.acquire_lease(ORG, "us-west-2/promoter", "replica-a", ttl=30)
    assert (a.owner, a.version) == ("replica-a", 1)
    with pytest.raises(LeaseHeldError) as info:
        table.acquire_lease(ORG, "us-west-2/promoter", "replica-b", ttl=30)
    assert info.value.owner == "replica-a"
    again = table.acquire_lease(ORG, "us-west-2/promoter", "replica-a", ttl=60)
    assert again.version == 2 and again.expires_at > a.expires_at
    renewed = table.renew_lease(again, ttl=30)
    assert renewed.version == 3
    assert table.get_lease(ORG, "us-west-2/promoter") == renewed


def test_expired_lease_is_taken_over_and_the_old_holder_loses_it(
    table: MirrorsTable, clock: ManualClock
) -> None:
    a = table.acquire_lease(ORG, "work", "replica-a", ttl=10)
    clock.advance(11)
    b = table.acquire_lease(ORG, "work", "replica-b", ttl=10)
    assert b.owner == "replica-b" and b.version == a.version + 1
    with pytest.raises(LeaseLostError):
        table.renew_lease(a, ttl=10)
    assert table.release_lease(a) is False
    assert table.get_lease(ORG, "work") == b
    assert table.release_lease(b) is True
    assert table.get_lease(ORG, "work") is None
    assert table.acquire_lease(ORG, "work", "replica-a", ttl=10).version == 1


def test_an_expired_lease_nobody_took_can_still_be_renewed(
    table: MirrorsTable, clock: ManualClock
) -> None:
    a = table.acquire_lease(ORG, "work", "replica-a", ttl=5)
    clock.advance(6)
    assert table.renew_lease(a, ttl=5).expires_at > clock()
    with pytest.raises(InvalidMirrorArgumentError):
        table.acquire_lease(ORG, "work", "replica-a", ttl=0)


# --- bulk import ----------------------------------------------------------------------------
def test_import_keeps_rows_and_enforces_uniqueness(
    table: MirrorsTable, mirrors_config: dict[str, Any], tmp_path: Any
) -> None:
    from mirrors_db import open_mirrors_table

    source = [table.create_mirror(spec()) for _ in range(3)]
    source[1] = table.update_mirror(source[1].with_state(S.ACTIVE))
    other_path = tmp_path / "copy.db"
    with open_mirrors_table({"type": "sqlite", "sqlite": {"path": str(other_path)}}) as copy:
        copy.import_mirrors(source)
        assert copy.list_mirrors(ORG).mirrors == sorted(source, key=lambda m: m.id)
    clash = replace(source[0], id="another-id")  # same live name and namespace
    fresh = table.create_mirror(spec()).spec
    with pytest.raises(MirrorExistsError):
        table.import_mirrors([replace(table.get_mirror(ORG, fresh.id), id="x-1",
                                      name="free-name", storage_namespace="s3://free/ns"),
                              clash])
    with pytest.raises(MirrorNotFoundError):
        table.get_mirror(ORG, "x-1")


# --- malformed rows ---------------------------------------------------------------------------
def corrupt_state(config: dict[str, Any], mirror_id: str) -> None:
    """Write an unknown state straight into the backend, bypassing the table."""
    if config["type"] == "dynamodb":
        d = config["dynamodb"]
        client = boto3.client("dynamodb", region_name=d["aws_region"],
                              endpoint_url=d["endpoint_url"])
        key = {"organization_id": {"S": ORG}, "row_id": {"S": f"mirror#{mirror_id}"}}
        client.update_item(TableName=d["table_name"], Key=key,
                           UpdateExpression="SET #s = :s", ExpressionAttributeNames={"#s": "state"},
                           ExpressionAttributeValues={":s": {"S": "bogus"}})
        client.close()
        return
    url = (postgres_url(config["postgres"]["connection_string"]) if config["type"] == "postgres"
           else sa.URL.create("sqlite+pysqlite", database=config["sqlite"]["path"]))
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE mirrors_db_mirrors SET state = 'bogus' WHERE id = :id"),
                     {"id": mirror_id})
    engine.dispose()


def test_malformed_rows_raise_a_typed_error(
    table: MirrorsTable, mirrors_config: dict[str, Any]
) -> None:
    m = table.create_mirror(spec())
    corrupt_state(mirrors_config, m.id)
    with pytest.raises(MalformedRowError) as info:
        table.get_mirror(ORG, m.id)
    assert m.id in info.value.key and "bogus" in str(info.value)
    with pytest.raises(MalformedRowError):
        table.list_mirrors(ORG)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_table_from_before_storage_ids_gets_the_column(
    backend: str, request: pytest.FixtureRequest, tmp_path: Any, unique_name: str,
    clock: ManualClock
) -> None:
    """SQL tables created without ``storage_id`` gain it on opening; their rows read as
    mirrors on the default store (DynamoDB items have no schema)."""
    mirrors_config = config_for(backend, request, tmp_path, unique_name)
    with open_mirrors_table(mirrors_config, clock=clock) as table:
        old = table.create_mirror(spec())
    url = (postgres_url(mirrors_config["postgres"]["connection_string"])
           if mirrors_config["type"] == "postgres"
           else sa.URL.create("sqlite+pysqlite", database=mirrors_config["sqlite"]["path"]))
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE mirrors_db_mirrors DROP COLUMN storage_id"))
    with open_mirrors_table(mirrors_config, clock=clock) as table:
        assert table.get_mirror(ORG, old.id).storage_id == ""
        new = table.create_mirror(spec(storage_id="second"))
        assert table.get_mirror(ORG, new.id).storage_id == "second"
    with engine.connect() as conn:
        columns = {c["name"] for c in sa.inspect(conn).get_columns("mirrors_db_mirrors")}
    engine.dispose()
    assert "storage_id" in columns
