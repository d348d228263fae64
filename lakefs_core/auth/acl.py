"""Group ACLs, lakeFS's simplified permissions: one of four permissions for a group, over
every repository or a list of them, kept as one policy attached to the group.

| permission | allows                                                        |
|------------|---------------------------------------------------------------|
| Read       | reading and listing (data, pull requests), own credentials     |
| Write      | Read, and writing data: objects, branches, tags, commits, PRs  |
| Super      | every repository action (``fs:*``, ``pr:*``, ``ci:*``, ...)    |
| Admin      | everything, on every repository (it cannot be scoped)          |

The policy is named ``ACL(_-_)<group>`` as lakeFS names it; its statements are the
materialized ACL, and reading an ACL back recognizes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lakefs_core.auth import rbac
from lakefs_core.auth.builtin import _FS_READ_WRITE, _PULL_REQUESTS_READ_WRITE
from lakefs_core.auth.model import Effect, Policy, Statement
from lakefs_core.errors import ValidationError

PERMISSIONS = ("Read", "Write", "Super", "Admin")
POLICY_PREFIX = "ACL(_-_)"

_REPOSITORY_ACTIONS: dict[str, list[str]] = {
    "Read": ["fs:List*", "fs:Read*", "pr:List*", "pr:Read*"],
    "Write": ["fs:List*", "fs:Read*"] + [a for a in _FS_READ_WRITE if not a.startswith(
        ("fs:List", "fs:Read"))] + _PULL_REQUESTS_READ_WRITE,
    "Super": ["fs:*", "pr:*", "ci:*", "retention:*", "branches:*"],
}
_OWN_CREDENTIALS = Statement(effect=Effect.ALLOW, action=[
    rbac.CREATE_CREDENTIALS, rbac.DELETE_CREDENTIALS, rbac.LIST_CREDENTIALS,
    rbac.READ_CREDENTIALS], resource=rbac.user_arn("${user}"))


@dataclass(frozen=True)
class ACL:
    """A group's permission; ``repositories`` is ignored when ``all_repositories``."""

    permission: str
    all_repositories: bool = True
    repositories: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.permission not in PERMISSIONS:
            raise ValidationError(f"Bad ACL permission {self.permission!r}: one of "
                                  f"{', '.join(PERMISSIONS)}")
        if self.permission == "Admin" and not self.all_repositories:
            raise ValidationError("Bad ACL permission: Admin applies to all repositories")
        if not self.all_repositories and not self.repositories:
            raise ValidationError("an ACL applies to all_repositories or to a list of "
                                  "repositories")


def policy_name(group: str) -> str:
    return POLICY_PREFIX + group


def _resources(acl: ACL) -> list[str]:
    if acl.all_repositories:
        return [rbac.ALL]
    arns = []
    for repo in sorted(set(acl.repositories)):
        arns += [rbac.repository_arn(repo), rbac.repository_arn(repo) + "/*"]
    return arns


def to_policy(group: str, acl: ACL) -> Policy:
    """The policy that grants ``acl`` to ``group``."""
    if acl.permission == "Admin":
        statements = [Statement(effect=Effect.ALLOW, action=["*"], resource=rbac.ALL)]
    else:
        actions = _REPOSITORY_ACTIONS[acl.permission]
        statements = [Statement(effect=Effect.ALLOW, action=list(actions), resource=r)
                      for r in _resources(acl)]
        # listing repositories and reading the configuration are not per repository
        statements.append(Statement(effect=Effect.ALLOW, action=[
            rbac.LIST_REPOSITORIES, rbac.READ_CONFIG], resource=rbac.ALL))
        statements.append(_OWN_CREDENTIALS)
    return Policy(policy_name(group), statements)


def from_policy(policy: Policy) -> ACL | None:
    """The ACL a policy made by :func:`to_policy` grants; None for any other policy."""
    statements: Sequence[Statement] = policy.statements
    if [list(s.action) for s in statements] == [["*"]]:
        return ACL("Admin")
    for permission, actions in _REPOSITORY_ACTIONS.items():
        scoped = [s for s in statements if list(s.action) == actions]
        if not scoped:
            continue
        resources = [str(s.resource) for s in scoped]
        if resources == [rbac.ALL]:
            return ACL(permission)
        repos = tuple(sorted({r.removeprefix(rbac.repository_arn("")).removesuffix("/*")
                              for r in resources}))
        return ACL(permission, all_repositories=False, repositories=repos)
    return None
