"""Users, access keys, groups and policies (RBAC) of the server.

The REST API authenticates with :meth:`AuthStore.authenticate` (basic auth) and the
S3 gateway with :func:`lakefs_core.gateway.sigv4.verify` using
``lambda key: store.get_credentials(key).secret``; both then authorize with
``rbac.check(store.effective_policies(user), requirement, username=user)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakefs_core.auth import builtin, rbac
from lakefs_core.auth.crypto import SecretBox, generate_access_key_id, generate_secret
from lakefs_core.auth.model import (
    Credential,
    CredentialSummary,
    Effect,
    Group,
    Policy,
    Statement,
    User,
)
from lakefs_core.auth.rbac import (
    Decision,
    Permission,
    Requirement,
    all_of,
    any_of,
    arn_match,
    authorize,
    check,
    evaluate,
)
from lakefs_core.auth.store import AuthStore
from lakefs_core.database import local_database_url, postgres_url
from lakefs_core.errors import ValidationError

if TYPE_CHECKING:
    from lakefs_core.config import DatabaseConfig

__all__ = [
    "AuthStore",
    "Credential",
    "CredentialSummary",
    "Decision",
    "Effect",
    "Group",
    "Permission",
    "Policy",
    "Requirement",
    "SecretBox",
    "Statement",
    "User",
    "all_of",
    "any_of",
    "arn_match",
    "authorize",
    "builtin",
    "check",
    "evaluate",
    "generate_access_key_id",
    "generate_secret",
    "open_auth_store",
    "rbac",
]


def open_auth_store(database: DatabaseConfig, secret_key: str) -> AuthStore:
    """The auth store (users, groups, policies, credentials) of a lakeFS ``database``
    block: in the PostgreSQL or SQLite database itself; beside a DynamoDB table, in the
    SQLite file at ``local.path``.

    Raises:
        ValidationError: no ``local.path`` where the store is an SQLite file.
    """
    if database.type == "postgres":
        assert database.postgres.connection_string is not None  # the model requires it
        url = postgres_url(database.postgres.connection_string.get_secret_value())
    elif database.local.path:
        url = local_database_url(database.local.path)
    else:
        raise ValidationError("database.local.path is required: the auth store's SQLite file")
    return AuthStore(url, secret_key)
