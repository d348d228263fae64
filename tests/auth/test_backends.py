"""open_auth_store: the auth store of a ``database`` settings block, for every type."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakefs_core.auth import AuthStore
from lakefs_core.auth.backends import open_auth_store
from lakefs_core.auth.dynamodb_store import DynamoDBAuthStore
from lakefs_core.auth.service import AuthService
from lakefs_core.config import DatabaseConfig
from lakefs_core.errors import ValidationError
from lakefs_testing.servers import MOTO_ENV
from tests.auth.conftest import SECRET_KEY


def test_each_database_type_opens_its_store(tmp_path: Path, pg_url: str, moto_endpoint: str,
                                            unique_name: str) -> None:
    blocks = {
        "local": DatabaseConfig.model_validate(
            {"type": "local", "local": {"path": str(tmp_path / "metadata.db")}}),
        "postgres": DatabaseConfig.model_validate(
            {"type": "postgres", "postgres": {"connection_string": pg_url}}),
        "dynamodb": DatabaseConfig.model_validate({"type": "dynamodb", "dynamodb": {
            "table_name": unique_name, "endpoint": moto_endpoint,
            "aws_region": MOTO_ENV["AWS_DEFAULT_REGION"],
            "aws_access_key_id": MOTO_ENV["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": MOTO_ENV["AWS_SECRET_ACCESS_KEY"]}}),
    }
    for kind, block in blocks.items():
        with open_auth_store(block, SECRET_KEY) as store:
            assert isinstance(store, DynamoDBAuthStore if kind == "dynamodb" else AuthStore)
            cred = store.setup_admin("admin")
        # another process with the same settings sees the same users and keys
        service = AuthService.open(block, SECRET_KEY)
        try:
            assert service.authenticate(cred.access_key_id, cred.secret).username == "admin"
        finally:
            service.close()
    assert (tmp_path / "metadata.db").is_file()
    with open_auth_store(blocks["dynamodb"], SECRET_KEY) as ddb:
        assert isinstance(ddb, DynamoDBAuthStore)
        ddb.client.delete_table(TableName=unique_name)


def test_a_local_database_needs_a_path(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="database.local.path"):
        open_auth_store(DatabaseConfig(), SECRET_KEY)
    with open_auth_store(DatabaseConfig(), SECRET_KEY, data_dir=str(tmp_path)) as store:
        assert store.list_users() == []
