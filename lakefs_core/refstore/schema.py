"""The refstore's tables (SQLAlchemy Core), one schema for SQLite and PostgreSQL.

Key columns (ids, names, paths) compare by code point on both backends (SQLite's
BINARY collation, PostgreSQL's ``C``), which is the order Python's ``sorted`` gives.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Double,
    ForeignKey,
    Integer,
    MetaData,
    Table,
    Text,
)


def _key() -> Text:
    """A text key column that sorts by code point on every backend."""
    return Text().with_variant(Text(collation="C"), "postgresql")


def _repo_fk() -> ForeignKey:
    return ForeignKey("repositories.id", ondelete="CASCADE")


#: every table of the refstore
schema = MetaData()

repositories = Table(
    "repositories", schema,
    Column("id", _key(), primary_key=True),
    Column("storage_namespace", Text, nullable=False),
    Column("default_branch", Text, nullable=False),
    Column("storage_id", Text, nullable=False),
    Column("read_only", Boolean, nullable=False),
    Column("creation_date", BigInteger, nullable=False),
)


def _repo_key_values(name: str) -> Table:
    """A table of string key/value pairs per repository."""
    return Table(
        name, schema,
        Column("repo", _key(), _repo_fk(), primary_key=True),
        Column("key", _key(), primary_key=True),
        Column("value", Text, nullable=False),
    )


repository_metadata = _repo_key_values("repository_metadata")

#: a repository's branch protection rules: a JSON list of fnmatch patterns
branch_protection = Table(
    "branch_protection", schema,
    Column("repo", _key(), _repo_fk(), primary_key=True),
    Column("patterns", Text, nullable=False),
)

#: branches left out of default listings (lakeFS's hidden branches)
hidden_branches = Table(
    "hidden_branches", schema,
    Column("repo", _key(), _repo_fk(), primary_key=True),
    Column("name", _key(), primary_key=True),
)

#: when a branch expires (unix seconds): the housekeeping loop deletes it after that
#: (this server's ephemeral branches)
branch_expiries = Table(
    "branch_expiries", schema,
    Column("repo", _key(), _repo_fk(), primary_key=True),
    Column("name", _key(), primary_key=True),
    Column("expires_at", BigInteger, nullable=False),
)

#: what makes a repository a mirror (see :class:`MirrorMarking`)
mirror_markings = Table(
    "mirror_markings", schema,
    Column("repo", _key(), _repo_fk(), primary_key=True),
    Column("mirror_id", Text, nullable=False),
    Column("source_region", Text, nullable=False),
    Column("source_repository", Text, nullable=False),
    Column("detached", Boolean, nullable=False),
)

#: commits of a mirror that replication proved fully present in its storage namespace
present_commits = Table(
    "present_commits", schema,
    Column("repo", _key(), _repo_fk(), primary_key=True),
    Column("commit_id", _key(), primary_key=True),
)

#: a repository's garbage collection rules (lakeFS's GarbageCollectionRules) ...
gc_rules = Table(
    "gc_rules", schema,
    Column("repo", _key(), _repo_fk(), primary_key=True),
    Column("default_retention_days", Integer, nullable=False),
)

#: ... and the retention of the branches that have a rule of their own
gc_branch_rules = Table(
    "gc_branch_rules", schema,
    Column("repo", _key(), _repo_fk(), primary_key=True),
    Column("branch", _key(), primary_key=True),
    Column("retention_days", Integer, nullable=False),
)

#: dumps and restores of a repository's refs (see :class:`RepositoryTask`)
repository_tasks = Table(
    "repository_tasks", schema,
    Column("repo", _key(), _repo_fk(), primary_key=True),
    Column("id", _key(), primary_key=True),
    Column("kind", Text, nullable=False),
    Column("done", Boolean, nullable=False),
    Column("update_time", Double, nullable=False),
    Column("error", Text, nullable=False),
    # the dump written (dump) or read (restore); NULL until known
    Column("commits_metarange_id", Text),
    Column("tags_metarange_id", Text),
    Column("branches_metarange_id", Text),
)

#: physical addresses handed out for clients to write to and then link (lakeFS's
#: link address tokens): linking takes an unexpired one and removes it
link_addresses = Table(
    "link_addresses", schema,
    Column("repo", _key(), _repo_fk(), primary_key=True),
    Column("address", _key(), primary_key=True),
    Column("expires_at", Double, nullable=False),
)

#: zero-copy imports: progress and outcome (see :class:`ImportState`)
imports = Table(
    "imports", schema,
    Column("repo", _key(), _repo_fk(), primary_key=True),
    Column("id", _key(), primary_key=True),
    Column("branch", Text, nullable=False),
    Column("updated_at", Double, nullable=False),
    Column("ingested", BigInteger, nullable=False),
    Column("metarange_id", Text, nullable=False),
    Column("commit_id", Text, nullable=False),
    Column("completed", Boolean, nullable=False),
    Column("committing", Boolean, nullable=False),
    Column("error", Text, nullable=False),
)

#: pull requests of a repository (see :class:`PullRequest`); ids sort by creation
pull_requests = Table(
    "pull_requests", schema,
    Column("repo", _key(), _repo_fk(), primary_key=True),
    Column("id", _key(), primary_key=True),
    Column("title", Text, nullable=False),
    Column("description", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("author", Text, nullable=False),
    Column("source_branch", Text, nullable=False),
    Column("destination_branch", Text, nullable=False),
    Column("creation_date", Double, nullable=False),
    Column("closed_date", Double),
    Column("merged_commit_id", Text),
)

#: runs of a repository's actions (see :class:`ActionRun`); ids sort newest first
action_runs = Table(
    "action_runs", schema,
    Column("repo", _key(), _repo_fk(), primary_key=True),
    Column("run_id", _key(), primary_key=True),
    Column("event_type", Text, nullable=False),
    Column("branch", Text, nullable=False),
    Column("source_ref", Text, nullable=False),
    Column("commit_id", Text, nullable=False),
    Column("start_time", Double, nullable=False),
    Column("end_time", Double, nullable=False),
    Column("status", Text, nullable=False),
)

#: the hooks of each run, with their output (see :class:`HookRun`)
hook_runs = Table(
    "hook_runs", schema,
    Column("repo", _key(), _repo_fk(), primary_key=True),
    Column("run_id", _key(), primary_key=True),
    Column("hook_run_id", _key(), primary_key=True),
    Column("action", Text, nullable=False),
    Column("hook_id", Text, nullable=False),
    Column("start_time", Double, nullable=False),
    Column("end_time", Double, nullable=False),
    Column("status", Text, nullable=False),
    Column("output", Text, nullable=False),
)

branches = Table(
    "branches", schema,
    Column("repo", _key(), _repo_fk(), primary_key=True),
    Column("name", _key(), primary_key=True),
    Column("commit_id", Text, nullable=False),
    Column("staging_token", Text, nullable=False),
    Column("sealed_tokens", Text, nullable=False),  # canonical JSON list, compared as text
    Column("sealed_at", Double, nullable=False),
)

tags = Table(
    "tags", schema,
    Column("repo", _key(), _repo_fk(), primary_key=True),
    Column("name", _key(), primary_key=True),
    Column("commit_id", Text, nullable=False),
)

# Commits and staged entries carry no foreign key (older databases have none to add):
# the refstore writes them only while it holds the repository row (see
# SQLRefStore._require_repository), and a repository's first commit in the
# transaction that creates the repository.
commits = Table(
    "commits", schema,
    Column("repo", _key(), primary_key=True),
    Column("commit_id", _key(), primary_key=True),
    Column("parents", Text, nullable=False),  # JSON list
    Column("metarange_id", Text, nullable=False),
    Column("message", Text, nullable=False),
    Column("committer", Text, nullable=False),
    Column("creation_date", BigInteger, nullable=False),
    Column("metadata", Text, nullable=False),  # JSON object
    Column("generation", Integer, nullable=False),
)

staged_entries = Table(
    "staged_entries", schema,
    Column("repo", _key(), primary_key=True),
    Column("staging_token", _key(), primary_key=True),
    Column("path", _key(), primary_key=True),
    Column("tombstone", Boolean, nullable=False),
    # the entry's fields; NULL for a tombstone
    Column("address", Text),
    Column("size", BigInteger),
    Column("etag", Text),
    Column("mtime", Double),
    Column("address_type", Text),
    Column("content_type", Text),
    Column("metadata", Text),  # JSON object
)

#: the tables holding a repository's rows, deleted with it (children first)
REPO_CHILDREN = (imports, staged_entries, present_commits, commits, tags, hidden_branches,
                 branch_expiries, branches, branch_protection, mirror_markings, pull_requests,
                 repository_metadata, gc_branch_rules, gc_rules, repository_tasks, hook_runs,
                 action_runs, link_addresses)
