"""Users, access keys, groups and policies (RBAC) of the server.

The auth store (:class:`BaseAuthStore`: SQL in :class:`AuthStore`, DynamoDB in
:mod:`lakefs_core.auth.dynamodb_store`) keeps them. The REST API authenticates with
:meth:`BaseAuthStore.authenticate` (basic auth) and the
S3 gateway with :func:`lakefs_core.gateway.sigv4.verify` using
``lambda key: store.get_credentials(key).secret``; both then authorize with
``rbac.check(store.effective_policies(user), requirement, username=user)``.
"""

from __future__ import annotations

from lakefs_core.auth import builtin, rbac
from lakefs_core.auth.backends import open_auth_store
from lakefs_core.auth.base import BaseAuthStore
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

__all__ = [
    "AuthStore",
    "BaseAuthStore",
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
