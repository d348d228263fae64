"""What only the DynamoDB auth store has: a deletion mark, and the refstore's table."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lakefs_core.auth.dynamodb_store import DynamoDBAuthStore
from lakefs_core.auth.model import Effect, Policy, Statement
from lakefs_core.errors import AlreadyExistsError, AuthenticationError, NotFoundError
from lakefs_core.graveler.model import Branch, Repository
from lakefs_testing.servers import MOTO_ENV
from tests.auth.conftest import SECRET_KEY, count_rows
from tests.refstore.conftest import open_dynamodb


@pytest.fixture
def store(moto_endpoint: str, unique_name: str) -> Iterator[DynamoDBAuthStore]:
    s = DynamoDBAuthStore(unique_name, SECRET_KEY, endpoint=moto_endpoint,
                          region=MOTO_ENV["AWS_DEFAULT_REGION"],
                          access_key_id=MOTO_ENV["AWS_ACCESS_KEY_ID"],
                          secret_access_key=MOTO_ENV["AWS_SECRET_ACCESS_KEY"])
    yield s
    s.client.delete_table(TableName=unique_name)
    s.close()


def _mark_deleting(store: DynamoDBAuthStore, pk: str, name: str) -> None:
    store.client.update_item(TableName=store.table_name,
                             Key={"pk": {"S": pk}, "sk": {"S": name}},
                             UpdateExpression="SET deleting = :t",
                             ExpressionAttributeValues={":t": {"BOOL": True}})


def test_a_user_deletion_cut_short_is_finished_by_deleting_again(
        store: DynamoDBAuthStore) -> None:
    store.create_user("alice")
    store.create_group("team")
    store.create_policy(Policy("p", [Statement(Effect.ALLOW, ["fs:*"], "*")]))
    cred = store.create_credentials("alice")
    store.add_user_to_group("alice", "team")
    store.attach_policy_to_user("alice", "p")
    # a process marked the user and was lost before sweeping its links
    _mark_deleting(store, "auth#users", "alice")
    with pytest.raises(NotFoundError):
        store.get_user("alice")
    assert store.list_users() == [] and store.list_group_members("team") == []
    with pytest.raises(AuthenticationError):
        store.authenticate(cred.access_key_id, cred.secret)
    with pytest.raises(NotFoundError):  # marked: no new links
        store.add_user_to_group("alice", "team")
    with pytest.raises(AlreadyExistsError):  # the name is not free until it is swept
        store.create_user("alice")
    store.delete_user("alice")
    for table in ("auth_users", "auth_credentials", "auth_group_members",
                  "auth_user_policies"):
        assert count_rows(store, table) == 0, table
    store.create_user("alice")
    assert store.list_credentials("alice") == [] and store.effective_policies("alice") == []


def test_a_group_being_deleted_takes_no_members(store: DynamoDBAuthStore) -> None:
    store.create_user("alice")
    store.create_group("team")
    _mark_deleting(store, "auth#groups", "team")
    with pytest.raises(NotFoundError, match="group not found: team"):
        store.add_user_to_group("alice", "team")
    assert store.list_groups() == []
    store.delete_group("team")
    with pytest.raises(NotFoundError):
        store.delete_group("team")


def test_auth_and_refstore_share_one_table(store: DynamoDBAuthStore,
                                           moto_endpoint: str) -> None:
    refs = open_dynamodb(moto_endpoint, store.table_name)
    try:
        refs.create_repository(Repository(id="r1", storage_namespace="local://r1",
                                          default_branch="main", creation_date=1),
                               Branch("main", "c0", "t0"))
        store.setup_admin("admin")
        assert [r.id for r in refs.list_repositories()] == ["r1"]
        refs.delete_repository("r1")
        assert [u.username for u in store.list_users()] == ["admin"]
        assert store.is_initialized()
    finally:
        refs.close()


def test_a_group_being_deleted_grants_nothing(store: DynamoDBAuthStore) -> None:
    store.create_user("alice")
    store.create_group("team")
    store.create_policy(Policy("p", [Statement(Effect.ALLOW, ["fs:*"], "*")]))
    store.attach_policy_to_group("team", "p")
    store.add_user_to_group("alice", "team")
    assert [p.name for p in store.effective_policies("alice")] == ["p"]
    _mark_deleting(store, "auth#groups", "team")  # its links are not swept yet
    assert store.effective_policies("alice") == []
    _mark_deleting(store, "auth#users", "alice")
    with pytest.raises(NotFoundError, match="user not found: alice"):
        store.effective_policies("alice")
