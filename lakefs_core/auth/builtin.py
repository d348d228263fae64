"""The policies and groups every installation starts with (as in lakeFS).

| group      | policies                                                    |
|------------|-------------------------------------------------------------|
| Admins     | FSFullAccess, AuthFullAccess, RepoManagementFullAccess      |
| SuperUsers | FSFullAccess, AuthManageOwnCredentials, RepoManagementReadAll |
| Developers | FSReadWriteAll, AuthManageOwnCredentials, RepoManagementReadAll |
| Viewers    | FSReadAll, AuthManageOwnCredentials                         |
"""

from __future__ import annotations

from lakefs_core.auth import rbac
from lakefs_core.auth.model import Effect, Policy, Statement


def _allow(actions: list[str], resource: str = rbac.ALL) -> Statement:
    return Statement(effect=Effect.ALLOW, action=actions, resource=resource)


FS_FULL_ACCESS = "FSFullAccess"
FS_READ_ALL = "FSReadAll"
FS_READ_WRITE_ALL = "FSReadWriteAll"
AUTH_FULL_ACCESS = "AuthFullAccess"
AUTH_MANAGE_OWN_CREDENTIALS = "AuthManageOwnCredentials"
REPO_MANAGEMENT_FULL_ACCESS = "RepoManagementFullAccess"
REPO_MANAGEMENT_READ_ALL = "RepoManagementReadAll"

ADMINS = "Admins"
SUPER_USERS = "SuperUsers"
DEVELOPERS = "Developers"
VIEWERS = "Viewers"


_FS_READ_WRITE = [
    rbac.LIST_REPOSITORIES, rbac.READ_REPOSITORY, rbac.READ_COMMIT, rbac.LIST_COMMITS,
    rbac.LIST_BRANCHES, rbac.LIST_TAGS, rbac.LIST_OBJECTS, rbac.READ_OBJECT,
    rbac.WRITE_OBJECT, rbac.DELETE_OBJECT, rbac.REVERT_BRANCH, rbac.READ_BRANCH,
    rbac.READ_TAG, rbac.CREATE_BRANCH, rbac.CREATE_TAG, rbac.DELETE_BRANCH,
    rbac.DELETE_TAG, rbac.CREATE_COMMIT,
]
_PULL_REQUESTS_READ_WRITE = [
    rbac.READ_PULL_REQUEST, rbac.CREATE_PULL_REQUEST, rbac.WRITE_PULL_REQUEST,
    rbac.LIST_PULL_REQUESTS,
]

#: earlier definitions of built-in policies (before pull requests): a stored policy
#: still equal to one was never edited, and is brought up to the current definition
SUPERSEDED: dict[str, tuple[list[Statement], ...]] = {
    FS_FULL_ACCESS: ([_allow(["fs:*"])],),
    FS_READ_ALL: ([_allow(["fs:List*", "fs:Read*"])],),
    FS_READ_WRITE_ALL: ([_allow(_FS_READ_WRITE)],),
}


def builtin_policies() -> list[Policy]:
    """The built-in policies, freshly dated."""
    return [
        Policy(FS_FULL_ACCESS, [_allow(["fs:*", "pr:*"])]),
        Policy(FS_READ_ALL, [_allow(["fs:List*", "fs:Read*", "pr:List*", "pr:Read*"])]),
        Policy(FS_READ_WRITE_ALL, [_allow(_FS_READ_WRITE + _PULL_REQUESTS_READ_WRITE)]),
        Policy(AUTH_FULL_ACCESS, [_allow(["auth:*"])]),
        Policy(AUTH_MANAGE_OWN_CREDENTIALS, [_allow([
            rbac.CREATE_CREDENTIALS, rbac.DELETE_CREDENTIALS, rbac.LIST_CREDENTIALS,
            rbac.READ_CREDENTIALS,
        ], rbac.user_arn("${user}"))]),
        Policy(REPO_MANAGEMENT_FULL_ACCESS, [
            _allow(["ci:*", "retention:*", "branches:*", rbac.READ_CONFIG]),
        ]),
        Policy(REPO_MANAGEMENT_READ_ALL, [
            _allow(["ci:Read*", "retention:Get*", "branches:Get*", rbac.READ_CONFIG]),
        ]),
    ]


#: group name -> names of the built-in policies attached to it
BUILTIN_GROUPS: dict[str, tuple[str, ...]] = {
    ADMINS: (FS_FULL_ACCESS, AUTH_FULL_ACCESS, REPO_MANAGEMENT_FULL_ACCESS),
    SUPER_USERS: (FS_FULL_ACCESS, AUTH_MANAGE_OWN_CREDENTIALS, REPO_MANAGEMENT_READ_ALL),
    DEVELOPERS: (FS_READ_WRITE_ALL, AUTH_MANAGE_OWN_CREDENTIALS, REPO_MANAGEMENT_READ_ALL),
    VIEWERS: (FS_READ_ALL, AUTH_MANAGE_OWN_CREDENTIALS),
}
