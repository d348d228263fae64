"""Rows of the refstore's tables to model values and back, and the hot statements.

Rows are read by position (much cheaper than by name): each converter takes the
values of its columns tuple, in that order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, Select, and_, bindparam, select

from lakefs_core.errors import ValidationError
from lakefs_core.graveler.model import (
    AddressType,
    Branch,
    Entry,
    EntryRecord,
    MirrorMarking,
    PullRequest,
    PullRequestStatus,
    Repository,
)
from lakefs_core.refstore.schema import (
    branch_protection,
    branches,
    hidden_branches,
    mirror_markings,
    present_commits,
    pull_requests,
    repositories,
    staged_entries,
)


def dump_tokens(tokens: tuple[str, ...]) -> str:
    return json.dumps(list(tokens), separators=(",", ":"))


def dump_map(values: Mapping[str, str]) -> str:
    if not values:
        return "{}"  # most objects carry no user metadata
    return json.dumps(dict(values), separators=(",", ":"))


def marking_of(values: Sequence[Any]) -> MirrorMarking:
    mirror_id, source_region, source_repository, detached = values
    return MirrorMarking(mirror_id, source_region, source_repository, bool(detached))


REPOSITORY_COLUMNS = (
    repositories.c.id, repositories.c.storage_namespace, repositories.c.default_branch,
    repositories.c.creation_date, repositories.c.storage_id, repositories.c.read_only)
BRANCH_COLUMNS = (branches.c.name, branches.c.commit_id, branches.c.staging_token,
                   branches.c.sealed_tokens, branches.c.sealed_at)
ENTRY_COLUMNS = (
    staged_entries.c.path, staged_entries.c.tombstone, staged_entries.c.address,
    staged_entries.c.size, staged_entries.c.etag, staged_entries.c.mtime,
    staged_entries.c.address_type, staged_entries.c.content_type, staged_entries.c.metadata)


def repository_of(values: Sequence[Any]) -> Repository:
    repo_id, namespace, default_branch, creation_date, storage_id, read_only = values
    return Repository(
        id=repo_id,
        storage_namespace=namespace,
        default_branch=default_branch,
        creation_date=creation_date,
        storage_id=storage_id,
        read_only=bool(read_only),
    )


def branch_of(values: Sequence[Any]) -> Branch:
    name, commit_id, staging_token, sealed_tokens, sealed_at = values
    return Branch(
        name=name,
        commit_id=commit_id,
        staging_token=staging_token,
        # a branch has sealed tokens only while a commit is in progress
        sealed_tokens=() if sealed_tokens == "[]" else tuple(json.loads(sealed_tokens)),
        sealed_at=sealed_at,
    )


def branch_values(branch: Branch) -> dict[str, Any]:
    return {
        "commit_id": branch.commit_id,
        "staging_token": branch.staging_token,
        "sealed_tokens": dump_tokens(branch.sealed_tokens),
        "sealed_at": float(branch.sealed_at),
    }


PULL_REQUEST_COLUMNS = (
    pull_requests.c.id, pull_requests.c.title, pull_requests.c.description,
    pull_requests.c.status, pull_requests.c.author, pull_requests.c.source_branch,
    pull_requests.c.destination_branch, pull_requests.c.creation_date,
    pull_requests.c.closed_date, pull_requests.c.merged_commit_id)


def pull_request_of(values: Sequence[Any]) -> PullRequest:
    (pr_id, title, description, status, author, source, destination, created, closed,
     merged) = values
    return PullRequest(id=pr_id, title=title, description=description,
                       status=PullRequestStatus(status), author=author, source_branch=source,
                       destination_branch=destination, creation_date=created,
                       closed_date=closed, merged_commit_id=merged)


def pull_request_values(pr: PullRequest) -> dict[str, Any]:
    return {"title": pr.title, "description": pr.description, "status": pr.status.value,
            "author": pr.author, "source_branch": pr.source_branch,
            "destination_branch": pr.destination_branch,
            "creation_date": float(pr.creation_date), "closed_date": pr.closed_date,
            "merged_commit_id": pr.merged_commit_id}


def entry_record_of(values: Sequence[Any]) -> EntryRecord:
    path, tombstone, address, size, etag, mtime, address_type, content_type, metadata = values
    if tombstone:
        return EntryRecord(path=path, entry=None)
    return EntryRecord(
        path=path,
        entry=Entry(
            address=address,
            size=size,
            etag=etag,
            mtime=mtime,
            address_type=AddressType(address_type),
            content_type=content_type,
            metadata={} if metadata == "{}" else json.loads(metadata),
        ),
    )


def entry_values(record: EntryRecord) -> dict[str, Any]:
    entry = record.entry
    if entry is None:
        return {"tombstone": True, "address": None, "size": None, "etag": None, "mtime": None,
                "address_type": None, "content_type": None, "metadata": None}
    return {
        "tombstone": False,
        "address": entry.address,
        "size": entry.size,
        "etag": entry.etag,
        "mtime": float(entry.mtime),
        "address_type": AddressType(entry.address_type).value,
        "content_type": entry.content_type,
        "metadata": dump_map(entry.metadata),
    }


# --- statements of the hot paths -------------------------------------------------------
# Built once with bind parameters: SQLAlchemy memoizes a statement's cache key on the
# statement object, so executing one of these skips building the statement and its key.
SELECT_REPOSITORY = select(*REPOSITORY_COLUMNS).where(
    repositories.c.id == bindparam("repo"))
SELECT_PROTECTION = select(branch_protection.c.patterns).where(
    branch_protection.c.repo == bindparam("repo"))
SELECT_PRESENT = select(present_commits.c.commit_id).where(
    present_commits.c.repo == bindparam("repo"),
    present_commits.c.commit_id == bindparam("commit_id"))
SELECT_HIDDEN = select(hidden_branches.c.name).where(
    hidden_branches.c.repo == bindparam("repo"), hidden_branches.c.name == bindparam("name"))
SELECT_MARKING = select(
    mirror_markings.c.mirror_id, mirror_markings.c.source_region,
    mirror_markings.c.source_repository, mirror_markings.c.detached,
).where(mirror_markings.c.repo == bindparam("repo"))
SELECT_BRANCH = select(*BRANCH_COLUMNS).where(
    branches.c.repo == bindparam("repo"), branches.c.name == bindparam("name"))
#: a branch, share-locked until the transaction ends (PostgreSQL)
SELECT_BRANCH_SHARED = SELECT_BRANCH.with_for_update(read=True)
#: whether a repository exists (its id)
REPOSITORY_EXISTS = select(repositories.c.id).where(repositories.c.id == bindparam("repo"))
SELECT_STAGED = select(*ENTRY_COLUMNS).where(
    staged_entries.c.repo == bindparam("repo"),
    staged_entries.c.staging_token == bindparam("token"),
    staged_entries.c.path == bindparam("path"))
#: a repository, its branch protection patterns (NULL when none) and one of its branches
#: (NULL columns when missing): what a direct write checks
SELECT_WRITE_TARGET = (
    select(*REPOSITORY_COLUMNS, branch_protection.c.patterns, *BRANCH_COLUMNS)
    .select_from(
        repositories
        .outerjoin(branch_protection, branch_protection.c.repo == repositories.c.id)
        .outerjoin(branches, and_(branches.c.repo == repositories.c.id,
                                  branches.c.name == bindparam("name"))))
    .where(repositories.c.id == bindparam("repo")))
#: a repository, one of its branches (NULL columns when missing) and the record staged
#: at a path under that branch's live token (NULL columns if none): what a read on a
#: branch needs, in one statement
SELECT_REPOSITORY_BRANCH_STAGED = (
    select(*REPOSITORY_COLUMNS, *BRANCH_COLUMNS, *ENTRY_COLUMNS)
    .select_from(
        repositories
        .outerjoin(branches, and_(branches.c.repo == repositories.c.id,
                                  branches.c.name == bindparam("name")))
        .outerjoin(staged_entries, and_(
            staged_entries.c.repo == branches.c.repo,
            staged_entries.c.staging_token == branches.c.staging_token,
            staged_entries.c.path == bindparam("path"))))
    .where(repositories.c.id == bindparam("repo")))
#: a branch and the record staged at a path under its live token (NULL columns if none)
SELECT_BRANCH_STAGED = (
    select(*BRANCH_COLUMNS, *ENTRY_COLUMNS)
    .select_from(branches.outerjoin(staged_entries, and_(
        staged_entries.c.repo == branches.c.repo,
        staged_entries.c.staging_token == branches.c.staging_token,
        staged_entries.c.path == bindparam("path"))))
    .where(branches.c.repo == bindparam("repo"), branches.c.name == bindparam("name")))


# --- key ranges and listings ------------------------------------------------------
def prefix_end(prefix: str) -> str | None:
    """The least string greater than every string that starts with ``prefix``.

    Prefix filters use ``key >= prefix AND key < prefix_end(prefix)``: unlike LIKE
    this needs no escaping of ``%`` and ``_``, is case-sensitive on SQLite too, and
    is a plain index range scan. None means there is no upper bound.
    """
    chars = list(prefix)
    while chars:
        code = ord(chars.pop()) + 1
        if code <= 0x10FFFF:
            if 0xD800 <= code <= 0xDFFF:  # surrogates are not valid text
                code = 0xE000
            return "".join(chars) + chr(code)
    return None


def key_range(column: Any, prefix: str, after: str) -> list[ColumnElement[bool]]:
    clauses: list[ColumnElement[bool]] = []
    if prefix:
        clauses.append(column >= prefix)
        end = prefix_end(prefix)
        if end is not None:
            clauses.append(column < end)
    if after:
        clauses.append(column > after)
    return clauses


def fetch_all(conn: Connection, stmt: Select[Any]) -> Sequence[Row[Any]]:
    return conn.execute(stmt).all()


def check_amount(amount: int) -> None:
    if amount < 0:
        raise ValidationError(f"amount must not be negative, got {amount}")
