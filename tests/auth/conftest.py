"""Auth stores on every supported database: SQLite, PostgreSQL and DynamoDB (moto).

Tests that look at what is stored (rows, encrypted secrets) do it through the helpers
here, which read each backend's own layout.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from lakefs_core.auth import AuthStore, BaseAuthStore
from lakefs_core.auth.dynamodb_store import DynamoDBAuthStore
from lakefs_testing.servers import MOTO_ENV

SECRET_KEY = "a-test-encryption-key"

#: opens another store on the test's database; ``secret_key`` defaults to SECRET_KEY
OpenStore = Callable[..., BaseAuthStore]


@pytest.fixture(params=["sqlite", "postgresql", "dynamodb"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenStore]:
    """Opens auth stores on one fresh, empty database of each backend (closed at the end)."""
    opened: list[BaseAuthStore] = []
    if request.param == "dynamodb":
        endpoint: str = request.getfixturevalue("moto_endpoint")
        table: str = request.getfixturevalue("unique_name")

        def open_one(secret_key: str = SECRET_KEY) -> BaseAuthStore:
            opened.append(DynamoDBAuthStore(
                table, secret_key, endpoint=endpoint, region=MOTO_ENV["AWS_DEFAULT_REGION"],
                access_key_id=MOTO_ENV["AWS_ACCESS_KEY_ID"],
                secret_access_key=MOTO_ENV["AWS_SECRET_ACCESS_KEY"]))
            return opened[-1]
    else:
        url = (f"sqlite:///{tmp_path / 'auth.db'}" if request.param == "sqlite"
               else request.getfixturevalue("pg_schema_url"))

        def open_one(secret_key: str = SECRET_KEY) -> BaseAuthStore:
            opened.append(AuthStore(url, secret_key))
            return opened[-1]

    yield open_one
    if request.param == "dynamodb" and opened:  # moto keeps tables in memory: drop it
        first = opened[0]
        assert isinstance(first, DynamoDBAuthStore)
        first.client.delete_table(TableName=first.table_name)
    for s in opened:
        s.close()


@pytest.fixture
def store(open_store: OpenStore) -> BaseAuthStore:
    return open_store()


# --- what is stored ---------------------------------------------------------------------
def _scan(store: DynamoDBAuthStore) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    args: dict[str, Any] = {"TableName": store.table_name, "ConsistentRead": True}
    while True:
        page = store.client.scan(**args)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            return items
        args["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def count_rows(store: BaseAuthStore, table: str) -> int:
    """How many rows the SQL table ``table`` (``auth_users``, ``auth_credentials``,
    ``auth_group_members``, ``auth_user_policies``) holds; on DynamoDB the matching
    items, checked to be there from both sides of each link."""
    if isinstance(store, AuthStore):
        with store.engine.connect() as conn:
            return int(conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())
    assert isinstance(store, DynamoDBAuthStore)
    kinds: Counter[tuple[str, str]] = Counter()
    for item in _scan(store):
        pk, sk = item["pk"]["S"], item["sk"]["S"]
        part = pk.split("#")[1] if pk.startswith("auth#") else pk
        kinds[(part, sk.partition("#")[0] if "#" in pk[5:] else "")] += 1
    sides = {"auth_users": [("users", "")],
             "auth_credentials": [("credentials", ""), ("user", "cred")],
             "auth_group_members": [("group", "member"), ("user", "group")],
             "auth_user_policies": [("user", "policy"), ("policy", "user")]}[table]
    counts = {kinds[side] for side in sides}
    assert len(counts) == 1, f"the sides of {table} differ: {kinds}"
    return counts.pop()


def all_stored(store: BaseAuthStore) -> str:
    """Everything the store keeps, as text (bytes shown as bytes)."""
    dump = []
    if isinstance(store, AuthStore):
        with store.engine.connect() as conn:
            for table in sa.inspect(conn).get_table_names():
                if table.startswith("auth_"):
                    for row in conn.execute(sa.text(f"SELECT * FROM {table}")):
                        dump.append(repr(tuple(bytes(v) if isinstance(v, memoryview) else v
                                               for v in row)))
    else:
        assert isinstance(store, DynamoDBAuthStore)
        dump = [repr(item) for item in _scan(store)]
    return "\n".join(dump)


def stored_secret(store: BaseAuthStore, access_key_id: str) -> bytes:
    """The encrypted secret of an access key as stored."""
    if isinstance(store, AuthStore):
        with store.engine.connect() as conn:
            return bytes(conn.execute(sa.text(
                "SELECT secret_encrypted FROM auth_credentials WHERE access_key_id = :k"),
                {"k": access_key_id}).scalar_one())
    assert isinstance(store, DynamoDBAuthStore)
    item = store.client.get_item(TableName=store.table_name, ConsistentRead=True, Key={
        "pk": {"S": "auth#credentials"}, "sk": {"S": access_key_id}})["Item"]
    return bytes(item["secret"]["B"])


def overwrite_stored_secret(store: BaseAuthStore, access_key_id: str, blob: bytes) -> None:
    """Replace an access key's encrypted secret behind the store's back."""
    if isinstance(store, AuthStore):
        with store.engine.begin() as conn:
            conn.execute(sa.text(
                "UPDATE auth_credentials SET secret_encrypted = :b WHERE access_key_id = :k"),
                {"b": blob, "k": access_key_id})
        return
    assert isinstance(store, DynamoDBAuthStore)
    store.client.update_item(
        TableName=store.table_name,
        Key={"pk": {"S": "auth#credentials"}, "sk": {"S": access_key_id}},
        UpdateExpression="SET secret = :b", ExpressionAttributeValues={":b": {"B": blob}})
