"""What only the DynamoDB refstore has: its table, its deletion mark, its key layout."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lakefs_core.errors import (
    RepositoryExistsError,
    RepositoryNotFoundError,
    ValidationError,
)
from lakefs_core.graveler.model import Branch, Commit, EntryRecord, Repository
from lakefs_core.refstore.dynamodb import DynamoDBRefStore
from tests.refstore.conftest import open_dynamodb


@pytest.fixture
def store(moto_endpoint: str, unique_name: str) -> Iterator[DynamoDBRefStore]:
    s = open_dynamodb(moto_endpoint, unique_name)
    assert isinstance(s, DynamoDBRefStore)
    yield s
    s.client.delete_table(TableName=unique_name)
    s.close()


def _repo(store: DynamoDBRefStore, repo_id: str) -> None:
    store.create_repository(
        Repository(id=repo_id, storage_namespace=f"local://{repo_id}", default_branch="main",
                   creation_date=1),
        Branch("main", "c0", "t0"))


def test_a_deletion_cut_short_is_finished_by_deleting_again(store: DynamoDBRefStore) -> None:
    _repo(store, "r1")
    store.put_commit("r1", "c1", Commit(parents=(), metarange_id="m", message="m",
                                        committer="a", creation_date=1))
    # a process marked the repository and was lost before sweeping its records
    store.client.update_item(TableName=store.table_name, Key={"pk": {"S": "repos"},
                                                              "sk": {"S": "r1"}},
                             UpdateExpression="SET deleting = :t",
                             ExpressionAttributeValues={":t": {"BOOL": True}})
    with pytest.raises(RepositoryNotFoundError):
        store.get_repository("r1")
    assert store.list_repositories() == []
    with pytest.raises(RepositoryNotFoundError):  # marked: no new records
        store.put_staged("r1", "t0", EntryRecord("a", None))
    with pytest.raises(RepositoryExistsError):  # the id is not free until it is swept
        _repo(store, "r1")
    store.delete_repository("r1")
    items = store.client.scan(TableName=store.table_name)["Items"]
    assert items == []
    _repo(store, "r1")
    assert [b.name for b in store.list_branches("r1")] == ["main"]


def test_a_staging_token_with_the_key_separator_is_refused(store: DynamoDBRefStore) -> None:
    _repo(store, "r1")
    with pytest.raises(ValidationError, match="must not contain '#'"):
        store.put_staged("r1", "t#1", EntryRecord("a", None))
