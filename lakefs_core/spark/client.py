"""The few REST calls the Spark data source and jobs make to a server.

Only metadata goes through the server (refs, commits, staging, commits); data and
range files are read from the object store directly. The calls go through the
product's REST client (:mod:`lakefs_core.client`): bounded retries where retrying can
help, the server's error statuses as the typed errors of :mod:`lakefs_core.errors`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from lakefs_core import errors
from lakefs_core.client import API_PREFIX, RestClient, ServerRequestError
from lakefs_core.spark.options import ServerOptions


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """What the jobs need of a commit."""

    id: str
    metarange_id: str
    parents: tuple[str, ...]
    creation_date: int
    message: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RepositoryInfo:
    id: str
    storage_namespace: str
    default_branch: str
    read_only: bool


@dataclass(frozen=True, slots=True)
class StagedChange:
    """One uncommitted change of a branch (``type`` is added, removed or changed)."""

    path: str
    type: str


class LakeFSClient:
    """A synchronous client of the REST API (basic auth, bounded retries).

    Args:
        server: endpoint and credentials.
        timeout: seconds per request.
        attempts: tries per request for transport errors and 5xx answers.
    """

    def __init__(self, server: ServerOptions, *, timeout: float = 60.0, attempts: int = 4
                 ) -> None:
        self.server = server
        self._rest = RestClient(server.endpoint, server.access_key_id,
                                server.secret_access_key, timeout=timeout, attempts=attempts)

    def __enter__(self) -> LakeFSClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._rest.close()

    # --- plumbing ---------------------------------------------------------------------
    def _request(self, method: str, url: str, what: str, *, ok: Sequence[int] = (200,),
                 retry: bool = True, **kwargs: Any) -> httpx.Response:
        return self._rest.request(method, API_PREFIX + url, ok=ok, retry=retry, what=what,
                                  **kwargs)

    def _pages(self, url: str, what: str, params: Mapping[str, Any] | None = None,
               page_size: int = 1000) -> Iterator[dict[str, Any]]:
        return self._rest.pages(API_PREFIX + url, params=params, page_size=page_size, what=what)

    # --- repositories, refs, commits -------------------------------------------------
    def get_repository(self, repository: str) -> RepositoryInfo:
        """Raises: NotFoundError (no such repository)."""
        data = self._request("GET", f"/repositories/{repository}",
                             f"repository {repository}").json()
        return RepositoryInfo(data["id"], data["storage_namespace"], data["default_branch"],
                              bool(data.get("read_only", False)))

    def get_commit(self, repository: str, ref: str) -> CommitInfo:
        """The commit a ref (commit id, branch, tag, ``ref~N``...) resolves to now.

        Raises:
            NotFoundError: no such repository or ref.
        """
        data = self._request("GET", f"/repositories/{repository}/commits/{ref}",
                             f"ref {repository}@{ref}").json()
        return _commit(data)

    def log(self, repository: str, ref: str) -> Iterator[CommitInfo]:
        """Every commit reachable from ``ref``, newest first."""
        for data in self._pages(f"/repositories/{repository}/refs/{ref}/commits",
                                f"log of {repository}@{ref}"):
            yield _commit(data)

    def list_branches(self, repository: str) -> list[tuple[str, str]]:
        """``(branch, head commit id)`` of every branch (hidden ones too)."""
        return [(r["id"], r["commit_id"]) for r in self._pages(
            f"/repositories/{repository}/branches", f"branches of {repository}",
            {"show_hidden": "true"})]

    def list_tags(self, repository: str) -> list[tuple[str, str]]:
        """``(tag, commit id)`` of every tag."""
        return [(r["id"], r["commit_id"]) for r in self._pages(
            f"/repositories/{repository}/tags", f"tags of {repository}")]

    # --- garbage collection ----------------------------------------------------------
    def get_gc_rules(self, repository: str) -> tuple[int, dict[str, int]] | None:
        """The repository's ``(default_retention_days, {branch: days})``; None if unset."""
        try:
            data = self._request("GET", f"/repositories/{repository}/settings/gc_rules",
                                 f"gc rules of {repository}").json()
        except errors.NotFoundError:
            return None
        return (int(data["default_retention_days"]),
                {r["branch_id"]: int(r["retention_days"]) for r in data["branches"]})

    def prepare_gc_commits(self, repository: str) -> dict[str, Any]:
        """Have the server write a run's commits CSV (lakeFS's prepare_commits).

        Raises:
            NotFoundError: no such repository, or it has no rules.
        """
        data: dict[str, Any] = self._request(
            "POST", f"/repositories/{repository}/gc/prepare_commits",
            f"prepare gc commits of {repository}", ok=(201,), retry=False).json()
        return data

    def gc_grace_period(self) -> float:
        """Seconds during which a new object is never collected (the server's config)."""
        return float(self._request("GET", "/config/garbage-collection",
                                   "garbage collection config").json()["grace_period"])

    def get_branch_head(self, repository: str, branch: str) -> str:
        """Raises: NotFoundError (no such branch)."""
        return str(self._request("GET", f"/repositories/{repository}/branches/{branch}",
                                 f"branch {repository}@{branch}").json()["commit_id"])

    def create_branch(self, repository: str, branch: str, source: str) -> str:
        """Create ``branch`` at ``source``; returns its commit id."""
        return self._request("POST", f"/repositories/{repository}/branches",
                             f"create branch {repository}@{branch}", ok=(201,),
                             json={"name": branch, "source": source}).text.strip()

    def delete_branch(self, repository: str, branch: str) -> None:
        self._request("DELETE", f"/repositories/{repository}/branches/{branch}",
                      f"delete branch {repository}@{branch}", ok=(204,))

    def commit(self, repository: str, branch: str, message: str,
               metadata: Mapping[str, str] | None = None, *, retry: bool = True
               ) -> CommitInfo:
        """Commit the branch's staged changes.

        Args:
            retry: retry on transport errors and 5xx. A retried commit whose first
                answer was lost fails with "no changes"; callers that must know
                whether it landed pass False and look at the branch head.

        Raises:
            NoChangesError: nothing staged.
            ConflictError, ForbiddenError: refused by the server.
        """
        data = self._request("POST", f"/repositories/{repository}/branches/{branch}/commits",
                             f"commit to {repository}@{branch}", ok=(201,), retry=retry,
                             json={"message": message, "metadata": dict(metadata or {})}).json()
        return _commit(data)

    def merge(self, repository: str, source_ref: str, destination_branch: str,
              message: str = "", metadata: Mapping[str, str] | None = None) -> str:
        """Merge ``source_ref`` into a branch; returns the merge commit id."""
        data = self._request(
            "POST", f"/repositories/{repository}/refs/{source_ref}/merge/{destination_branch}",
            f"merge {source_ref} into {repository}@{destination_branch}",
            json={"message": message, "metadata": dict(metadata or {})}).json()
        return str(data["reference"])

    # --- objects and staging ---------------------------------------------------------------
    def upload_object(self, repository: str, branch: str, path: str, data: bytes) -> None:
        """Upload one object through the server (small objects: examples, tests)."""
        self._request("POST", f"/repositories/{repository}/branches/{branch}/objects",
                      f"upload {repository}@{branch}/{path}", ok=(201,),
                      params={"path": path}, content=data)

    def list_objects(self, repository: str, ref: str, prefix: str = ""
                     ) -> Iterator[dict[str, Any]]:
        """Object stats under ``prefix`` at ``ref`` (for a branch: with staged changes)."""
        return self._pages(f"/repositories/{repository}/refs/{ref}/objects/ls",
                           f"list {repository}@{ref}/{prefix}",
                           {"prefix": prefix, "user_metadata": "false"})

    def stat_object(self, repository: str, ref: str, path: str) -> dict[str, Any]:
        """Raises: NotFoundError."""
        return dict(self._request("GET", f"/repositories/{repository}/refs/{ref}/objects/stat",
                                  f"stat {repository}@{ref}/{path}",
                                  params={"path": path}).json())

    def get_physical_address(self, repository: str, branch: str, path: str) -> str:
        """A fresh address in the namespace to write an object to, for linking at
        ``path`` with :meth:`link_physical_address` (once, before it expires)."""
        data = self._request("GET", f"/repositories/{repository}/branches/{branch}/staging/backing",
                             f"get an address for {repository}@{branch}/{path}",
                             params={"path": path}).json()
        return str(data["physical_address"])

    def link_physical_address(self, repository: str, branch: str, path: str,
                              physical_address: str, size: int, checksum: str,
                              content_type: str = "application/octet-stream") -> None:
        """Stage at ``path`` an object already written at ``physical_address``, an address
        from :meth:`get_physical_address`."""
        body = {"staging": {"physical_address": physical_address}, "checksum": checksum,
                "size_bytes": size, "content_type": content_type}
        self._request("PUT", f"/repositories/{repository}/branches/{branch}/staging/backing",
                      f"stage {repository}@{branch}/{path}", params={"path": path}, json=body)

    def delete_objects(self, repository: str, branch: str, paths: Sequence[str]) -> None:
        """Stage the deletion of ``paths`` (in requests of at most 1000)."""
        for i in range(0, len(paths), 1000):
            batch = list(paths[i:i + 1000])
            body = self._request(
                "POST", f"/repositories/{repository}/branches/{branch}/objects/delete",
                f"delete objects in {repository}@{branch}", json={"paths": batch}).json()
            failed = body.get("errors") or []
            if failed:
                raise errors.ConflictError(f"delete objects in {repository}@{branch}: {failed[:5]}")

    def reset_object(self, repository: str, branch: str, path: str) -> None:
        """Drop the uncommitted change at ``path``."""
        self._request("PUT", f"/repositories/{repository}/branches/{branch}",
                      f"reset {repository}@{branch}/{path}", ok=(204,),
                      json={"type": "object", "path": path})

    def uncommitted(self, repository: str, branch: str) -> Iterator[StagedChange]:
        """The branch's uncommitted changes."""
        for d in self._pages(f"/repositories/{repository}/branches/{branch}/diff",
                             f"uncommitted changes of {repository}@{branch}"):
            if d.get("path_type", "object") == "object":
                yield StagedChange(d["path"], d["type"])


def _commit(data: Mapping[str, Any]) -> CommitInfo:
    return CommitInfo(id=data["id"], metarange_id=data.get("meta_range_id", ""),
                      parents=tuple(data.get("parents") or ()),
                      creation_date=int(data.get("creation_date", 0)),
                      message=data.get("message", ""),
                      metadata=dict(data.get("metadata") or {}))


__all__ = ["CommitInfo", "LakeFSClient", "RepositoryInfo", "ServerRequestError",
           "StagedChange"]
