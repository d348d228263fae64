"""A client of a lakeFS API in another region: what the sidecar needs of a source.

Commit records fetched here are checked against their ids (the id is a hash of the
record), so a corrupted or forged record is never written into a mirror.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import httpx

from lakefs_core.auth import rbac
from lakefs_core.client import API_PREFIX, RestClient
from lakefs_core.errors import LakeFSError, NotFoundError
from lakefs_core.graveler.encoding import commit_id
from lakefs_core.graveler.model import Commit, CommitRecord


class SourceError(LakeFSError):
    """The source lakeFS answered with an error or could not be reached."""


class SourceNotFoundError(SourceError, NotFoundError):
    pass


class SourceForbiddenError(SourceError):
    """The replication user may not do what a request needs (401 or 403).

    Attributes:
        request: the request, ``METHOD /path``.
        action: the permission it needs, e.g. ``fs:ListTags on arn:...``.
        status: 401 or 403.
    """

    def __init__(self, message: str, *, request: str, action: str, status: int) -> None:
        super().__init__(message)
        self.request = request
        self.action = action
        self.status = status


class CommitIntegrityError(SourceError):
    """A commit record does not hash to its id."""


#: the replication service's path that answers the heads of many repositories at once
HEADS_PATH = "/service/replication/v1/internal/heads"
#: repositories one heads request asks about
HEADS_BATCH = 500


@dataclass(frozen=True, slots=True)
class SourceHeads:
    """A repository's refs as its region's replication service read them."""

    branches: dict[str, str]
    #: None when the replication user may not list them
    tags: dict[str, str] | None


@dataclass(frozen=True, slots=True)
class SourceRef:
    name: str
    commit_id: str


def commit_from_json(data: dict) -> CommitRecord:
    """A commit record from the API's Commit JSON, verified against its id."""
    commit = Commit(
        parents=tuple(data.get("parents") or ()),
        metarange_id=data.get("meta_range_id", ""),
        message=data.get("message", ""),
        committer=data.get("committer", ""),
        creation_date=int(data.get("creation_date", 0)),
        metadata=dict(data.get("metadata") or {}),
        generation=int(data.get("generation") or 0),
    )
    cid = data.get("id", "")
    if commit_id(commit) != cid:
        raise CommitIntegrityError(f"commit record does not match its id {cid!r}")
    return CommitRecord(cid, commit)


class SourceClient:
    """The source lakeFS as the sidecar reads it (basic auth, bounded retries).

    Built on the product's REST client (:class:`~lakefs_core.client.RestClient`);
    every failure is a :class:`SourceError` (:class:`SourceNotFoundError` for 404).

    Args:
        endpoint: the lakeFS base URL (``http://host:port``), without ``/api/v1``.
        access_key_id, secret_access_key: the replication user's credentials.
    """

    def __init__(self, endpoint: str, access_key_id: str, secret_access_key: str, *,
                 timeout: float = 30.0, attempts: int = 3) -> None:
        self.endpoint = endpoint.rstrip("/")
        self._rest = RestClient(self.endpoint, access_key_id, secret_access_key,
                                timeout=timeout, attempts=attempts, max_connections=32,
                                error_factory=self._error)
        #: repositories whose commit log this user may not read (commits go by id)
        self._log_forbidden: set[str] = set()

    def _error(self, method: str, path: str, status: int, message: str,
               what: str) -> SourceError:
        if status == 404:
            return SourceNotFoundError(message)
        if status in (401, 403):
            needs = f" (needs {what})" if what else ""
            return SourceForbiddenError(
                f"source lakeFS {self.endpoint}: {status} {message} on {method} {path}{needs}",
                request=f"{method} {path}", action=what, status=status)
        if status == 0:  # no answer: the message says so
            return SourceError(f"source lakeFS: {message}")
        return SourceError(f"source lakeFS {self.endpoint}: {status} {message}")

    @property
    def requests(self) -> int:
        """Requests sent so far (retries included)."""
        return self._rest.requests

    def close(self) -> None:
        self._rest.close()

    def _get(self, url: str, /, what: str = "", **params: str | int | None) -> httpx.Response:
        return self._rest.request("GET", API_PREFIX + url, what=what,
                                  params={k: v for k, v in params.items() if v is not None})

    def _pages(self, url: str, page_size: int, what: str = "",
               **params: str | int | None) -> Iterator[dict]:
        return self._rest.pages(API_PREFIX + url, page_size=page_size, what=what,
                                params={k: v for k, v in params.items() if v is not None})

    # --- repositories and refs ---------------------------------------------------------
    def list_repositories(self, page_size: int = 1000) -> Iterator[dict]:
        """Every repository (the API's Repository JSON), ``page_size`` a page."""
        return self._pages("/repositories", page_size,
                           what=f"{rbac.LIST_REPOSITORIES} on {rbac.ALL}")

    def get_repository(self, repo: str) -> dict:
        return dict(self._get(f"/repositories/{repo}",
                              what=_needs(rbac.READ_REPOSITORY, repo)).json())

    def storage_configs(self) -> tuple[dict | None, list[dict]]:
        """The region's default store and all its stores (``/config``: the
        ``storage_config`` and ``storage_config_list`` of lakeFS's API)."""
        config = self._get("/config").json()
        return config.get("storage_config"), list(config.get("storage_config_list") or [])

    def list_branches(self, repo: str, page_size: int = 1000) -> list[SourceRef]:
        return [SourceRef(r["id"], r["commit_id"])
                for r in self._pages(f"/repositories/{repo}/branches", page_size,
                                     what=_needs(rbac.LIST_BRANCHES, repo))]

    def list_tags(self, repo: str, page_size: int = 1000) -> list[SourceRef]:
        return [SourceRef(r["id"], r["commit_id"])
                for r in self._pages(f"/repositories/{repo}/tags", page_size,
                                     what=_needs(rbac.LIST_TAGS, repo))]

    def heads(self, repos: Sequence[str]) -> dict[str, SourceHeads | None]:
        """The heads of many repositories, :data:`HEADS_BATCH` a request, from the
        region's replication service (behind its server): None for a repository the
        user may not list the branches of, or that is not there.

        Raises:
            SourceNotFoundError: the region's replication service does not answer this
                (an older version, or none behind the server).
            SourceError: any other failure.
        """
        out: dict[str, SourceHeads | None] = {}
        for i in range(0, len(repos), HEADS_BATCH):
            answer = self._rest.request("POST", HEADS_PATH,
                                        json={"repositories": list(repos[i:i + HEADS_BATCH])},
                                        what="fs:ListBranches on each repository").json()
            for repo, refs in dict(answer.get("repositories") or {}).items():
                out[repo] = None if refs is None else SourceHeads(
                    dict(refs.get("branches") or {}),
                    None if refs.get("tags") is None else dict(refs["tags"]))
        return out

    def get_commit(self, repo: str, commit: str) -> CommitRecord:
        return commit_from_json(self._get(f"/repositories/{repo}/commits/{commit}",
                                          what=_needs(rbac.READ_COMMIT, repo)).json())

    def new_commits(self, repo: str, head: str, known: Callable[[str], bool],
                    page_size: int = 1000) -> list[CommitRecord]:
        """Commits reachable from ``head`` that are not ``known``, oldest first.

        Relies on the invariant that a known commit's ancestors are all known (the
        sidecar writes records oldest first). Reads the commit log (a page per
        ``page_size`` commits); a user that may not read the log (it needs
        ``fs:ReadBranch``, which the narrow replication policy does not grant) gets the
        commits one by one by id (``fs:ReadCommit``).
        """
        if known(head):
            return []
        if repo not in self._log_forbidden:
            try:
                return self._new_commits_from_log(repo, head, known, page_size)
            except SourceForbiddenError:
                self._log_forbidden.add(repo)
        return self._new_commits_by_id(repo, head, known)

    def _new_commits_by_id(self, repo: str, head: str,
                           known: Callable[[str], bool]) -> list[CommitRecord]:
        """The walk of :meth:`new_commits` by commit id, parents before children."""
        records: dict[str, CommitRecord] = {}
        order: list[CommitRecord] = []
        stack: list[tuple[str, bool]] = [(head, False)]
        while stack:  # depth-first, each commit emitted after its parents (post-order)
            cid, parents_done = stack.pop()
            if parents_done:
                order.append(records[cid])
                continue
            if cid in records:
                continue
            records[cid] = rec = self.get_commit(repo, cid)
            stack.append((cid, True))
            stack.extend((p, False) for p in reversed(rec.commit.parents)
                         if p not in records and not known(p))
        return order

    def _new_commits_from_log(self, repo: str, head: str, known: Callable[[str], bool],
                              page_size: int) -> list[CommitRecord]:
        needed = {head}
        found: list[CommitRecord] = []
        for data in self._pages(f"/repositories/{repo}/refs/{head}/commits", page_size,
                                what=_needs(rbac.READ_BRANCH, repo, branch=head)):
            cid = data.get("id", "")
            if cid not in needed:
                continue
            needed.discard(cid)
            rec = commit_from_json(data)
            found.append(rec)
            needed.update(p for p in rec.commit.parents if not known(p))
            if not needed:
                break
        if needed:
            raise SourceError(f"source log of {repo}@{head} misses commits {sorted(needed)[:3]}")
        found.reverse()
        return found

    # --- data (for the builtin copier) ---------------------------------------------------
    def read_object(self, repo: str, ref: str, path: str) -> bytes:
        return self._get(f"/repositories/{repo}/refs/{ref}/objects", path=path,
                         what=f"{rbac.READ_OBJECT} on {rbac.object_arn(repo, path)}").content

    @contextlib.contextmanager
    def open_object(self, repo: str, ref: str, path: str, chunk_size: int = 1 << 20
                    ) -> Iterator[Iterator[bytes]]:
        """The object's bytes as they arrive, ``chunk_size`` at a time (one request, not
        retried: the caller retries a broken transfer whole).

        Raises:
            SourceError: as :meth:`read_object` (on entering the context).
        """
        with self._rest.stream("GET", f"{API_PREFIX}/repositories/{repo}/refs/{ref}/objects",
                               params={"path": path},
                               what=f"{rbac.READ_OBJECT} on {rbac.object_arn(repo, path)}"
                               ) as resp:
            yield resp.iter_bytes(chunk_size)

    def read_metadata_file(self, repo: str, file_id: str) -> bytes:
        """A range or metarange file of the repository (by id)."""
        return self._get(f"/repositories/{repo}/metadata/files/{file_id}",
                         what=_needs(rbac.READ_REPOSITORY, repo)).content


def _needs(action: str, repo: str, *, branch: str | None = None) -> str:
    """What a request needs, as an operator adds it to a policy."""
    arn = rbac.branch_arn(repo, branch) if branch else rbac.repository_arn(repo)
    return f"{action} on {arn}"
