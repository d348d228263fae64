"""Checks that a server's stored state is whole: nothing half-changed, nothing orphaned.

Reads the refstore and auth tables directly (bypassing every cache) and the range
files from the object store, and reports each broken rule as one line:

- every branch head (but the empty head of a bare repository) and tag names a commit
  of its repository; every commit's metarange and ranges load and its parents exist;
- a repository's default branch exists; hidden branches, branch expiries and present
  commits name existing branches and commits;
- staged entries belong to a staging token (current or sealed) of an existing branch;
- no row of any table belongs to a repository that does not exist (deleting a
  repository leaves nothing of it behind);
- auth rows (credentials, group members, attached policies) name existing users,
  groups and policies.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable

from sqlalchemy import Engine, Table, select

from lakefs_core.auth import tables as auth_tables
from lakefs_core.auth.store import AuthStore
from lakefs_core.errors import LakeFSError
from lakefs_core.graveler.ranges import RangeManager
from lakefs_core.refstore.schema import (
    branch_expiries,
    branches,
    commits,
    hidden_branches,
    present_commits,
    repositories,
    staged_entries,
    tags,
)
from lakefs_core.refstore.schema import schema as refstore_schema
from lakefs_core.services import Services

#: at most this many findings of one kind are listed (the rest are counted)
MAX_LISTED = 20


def check_consistency(services: Services) -> list[str]:
    """Every broken rule of the module docstring found in ``services``' stores."""
    findings = _Findings()
    engine = getattr(services.refstore, "engine", None)
    if not isinstance(engine, Engine):
        raise TypeError(f"{services.refstore!r} is not a SQL refstore")
    _check_refs(services, engine, findings)
    if not isinstance(services.auth, AuthStore):
        raise TypeError(f"{services.auth!r} is not a SQL auth store")
    _check_auth(services.auth.engine, findings)
    return findings.lines()


class _Findings:
    def __init__(self) -> None:
        self._by_kind: dict[str, list[str]] = defaultdict(list)

    def add(self, kind: str, detail: str) -> None:
        self._by_kind[kind].append(detail)

    def lines(self) -> list[str]:
        out = []
        for kind, details in sorted(self._by_kind.items()):
            shown = details[:MAX_LISTED]
            more = f" (and {len(details) - len(shown)} more)" if len(details) > len(shown) else ""
            out.append(f"{kind}: {', '.join(shown)}{more}")
        return out


def _rows(engine: Engine, table: Table) -> list[dict[str, object]]:
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(select(table))]


def _check_refs(services: Services, engine: Engine, findings: _Findings) -> None:
    repos: dict[str, dict[str, object]] = {str(r["id"]): r for r in _rows(engine, repositories)}
    for table in refstore_schema.sorted_tables:
        if "repo" not in table.c:
            continue
        orphans = {str(r["repo"]) for r in _rows(engine, table)} - repos.keys()
        for repo in sorted(orphans):
            findings.add(f"rows of a missing repository in {table.name}", repr(repo))

    repo_commits: dict[str, dict[str, dict[str, object]]] = defaultdict(dict)
    for row in _rows(engine, commits):
        repo_commits[str(row["repo"])][str(row["commit_id"])] = row
    repo_branches: dict[str, dict[str, dict[str, object]]] = defaultdict(dict)
    for row in _rows(engine, branches):
        repo_branches[str(row["repo"])][str(row["name"])] = row

    for repo_id, repo_row in sorted(repos.items()):
        known = repo_commits[repo_id]
        own_branches = repo_branches[repo_id]
        if repo_row["default_branch"] not in own_branches:
            findings.add("default branch missing", f"{repo_id}@{repo_row['default_branch']}")
        for name, row in own_branches.items():
            # a bare repository's branch points at no commit until one is restored
            if row["commit_id"] and row["commit_id"] not in known:
                findings.add("branch head is no commit", f"{repo_id}@{name}->{row['commit_id']}")
        for row in _rows_of(engine, tags, repo_id):
            if row["commit_id"] not in known:
                findings.add("tag is no commit", f"{repo_id}:{row['name']}->{row['commit_id']}")
        for row in _rows_of(engine, hidden_branches, repo_id):
            if row["name"] not in own_branches:
                findings.add("hidden mark of a missing branch", f"{repo_id}@{row['name']}")
        for row in _rows_of(engine, branch_expiries, repo_id):
            if row["name"] not in own_branches:
                findings.add("expiry of a missing branch", f"{repo_id}@{row['name']}")
        for row in _rows_of(engine, present_commits, repo_id):
            if row["commit_id"] not in known:
                findings.add("present mark of a missing commit", f"{repo_id}:{row['commit_id']}")
        tokens = set()
        for row in own_branches.values():
            tokens.add(row["staging_token"])
            tokens.update(json.loads(str(row["sealed_tokens"])))
        for token in sorted({str(r["staging_token"]) for r in _rows_of(engine, staged_entries,
                                                                        repo_id)} - tokens):
            findings.add("staged entries of no branch", f"{repo_id}:{token}")
        ranges = _ranges_of(services, repo_id, str(repo_row["storage_namespace"]),
                            str(repo_row["storage_id"]))
        for commit_id, row in sorted(known.items()):
            for parent in json.loads(str(row["parents"])):
                if parent not in known:
                    findings.add("commit parent missing", f"{repo_id}:{commit_id}^{parent}")
            problem = ranges.problem(str(row["metarange_id"]))
            if problem:
                findings.add("commit data unreadable", f"{repo_id}:{commit_id}: {problem}")


def _rows_of(engine: Engine, table: Table, repo_id: str) -> Iterable[dict[str, object]]:
    with engine.connect() as conn:
        return [dict(r._mapping)
                for r in conn.execute(select(table).where(table.c.repo == repo_id))]


class _RangeCheck:
    """Loads metaranges and ranges from the store once each, with no cache in between."""

    def __init__(self, ranges: RangeManager | None, error: str = "") -> None:
        self._ranges = ranges
        self._error = error
        self._checked: dict[str, str] = {}

    def problem(self, metarange_id: str) -> str:
        if self._ranges is None:
            return self._error
        if metarange_id not in self._checked:
            self._checked[metarange_id] = self._load(self._ranges, metarange_id)
        return self._checked[metarange_id]

    def _load(self, ranges: RangeManager, metarange_id: str) -> str:
        try:
            metarange = ranges.get_metarange(metarange_id)
        except LakeFSError as e:
            return f"metarange {metarange_id}: {e}"
        for info in metarange.ranges:
            if info.id not in self._checked:
                try:
                    ranges.read_range(info.id)
                    self._checked[info.id] = ""
                except LakeFSError as e:
                    self._checked[info.id] = f"range {info.id}: {e}"
            if self._checked[info.id]:
                return self._checked[info.id]
        return ""


def _ranges_of(services: Services, repo_id: str, namespace: str, storage_id: str) -> _RangeCheck:
    try:
        store = services.blockstores.for_storage_id(storage_id)
    except LakeFSError as e:
        return _RangeCheck(None, f"repository {repo_id}: {e}")
    return _RangeCheck(RangeManager(store, namespace, cache_size=1, cache_size_bytes=1))


def _check_auth(engine: Engine, findings: _Findings) -> None:
    users = {r["username"] for r in _rows(engine, auth_tables.users)}
    groups = {r["name"] for r in _rows(engine, auth_tables.groups)}
    policies = {r["name"] for r in _rows(engine, auth_tables.policies)}
    for row in _rows(engine, auth_tables.credentials):
        if row["username"] not in users:
            findings.add("credentials of a missing user", f"{row['access_key_id']}")
    for row in _rows(engine, auth_tables.group_members):
        for kind, value, known in (("group", row["group_name"], groups),
                                   ("user", row["username"], users)):
            if value not in known:
                findings.add(f"group membership of a missing {kind}", repr(value))
    for table, owner, owners in ((auth_tables.user_policies, "username", users),
                                 (auth_tables.group_policies, "group_name", groups)):
        for row in _rows(engine, table):
            if row[owner] not in owners:
                findings.add(f"policy attached to a missing {owner}", repr(row[owner]))
            if row["policy_name"] not in policies:
                findings.add("attachment of a missing policy", repr(row["policy_name"]))
