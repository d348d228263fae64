"""A client of a lakeFS API in another region: what the sidecar needs of a source.

Commit records fetched here are checked against their ids (the id is a hash of the
record), so a corrupted or forged record is never written into a mirror.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from lakefs_core.errors import LakeFSError, NotFoundError
from lakefs_core.graveler.encoding import commit_id
from lakefs_core.graveler.model import Commit, CommitRecord


class SourceError(LakeFSError):
    """The source lakeFS answered with an error or could not be reached."""


class SourceNotFoundError(SourceError, NotFoundError):
    pass


class CommitIntegrityError(SourceError):
    """A commit record does not hash to its id."""


@dataclass(frozen=True, slots=True)
class SourceRef:
    name: str
    commit_id: str


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, httpx.TransportError):
        return True
    return isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code >= 500


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
    """Synchronous lakeFS API client with basic auth and bounded retries.

    Args:
        endpoint: the lakeFS base URL (``http://host:port``), without ``/api/v1``.
        access_key_id, secret_access_key: the replication user's credentials.
    """

    def __init__(self, endpoint: str, access_key_id: str, secret_access_key: str, *,
                 timeout: float = 30.0, attempts: int = 3) -> None:
        self.endpoint = endpoint.rstrip("/")
        self._http = httpx.Client(base_url=f"{self.endpoint}/api/v1",
                                  auth=(access_key_id, secret_access_key), timeout=timeout,
                                  limits=httpx.Limits(max_connections=32))
        self._attempts = attempts
        self.requests = 0

    def close(self) -> None:
        self._http.close()

    def _get(self, url: str, /, **params: str | int | None) -> httpx.Response:
        def once() -> httpx.Response:
            self.requests += 1
            resp = self._http.get(url, params={k: v for k, v in params.items()
                                                if v is not None})
            if resp.status_code == 404:
                raise SourceNotFoundError(_message(resp))
            resp.raise_for_status()
            return resp

        try:
            for attempt in Retrying(retry=retry_if_exception(_retryable),
                                    stop=stop_after_attempt(self._attempts),
                                    wait=wait_random_exponential(multiplier=0.1, max=2),
                                    reraise=True):
                with attempt:
                    return once()
        except httpx.HTTPStatusError as e:
            raise SourceError(f"source lakeFS {self.endpoint}: {e.response.status_code} "
                              f"{_message(e.response)}") from e
        except httpx.TransportError as e:
            raise SourceError(f"source lakeFS {self.endpoint} unreachable: {e}") from e
        raise AssertionError("unreachable")  # pragma: no cover

    def _pages(self, url: str, page_size: int, **params: str | int | None) -> Iterator[dict]:
        after = ""
        while True:
            body = self._get(url, amount=page_size, after=after or None, **params).json()
            yield from body.get("results", [])
            pagination = body.get("pagination", {})
            if not pagination.get("has_more"):
                return
            after = pagination.get("next_offset", "")

    # --- repositories and refs ---------------------------------------------------------
    def get_repository(self, repo: str) -> dict:
        return dict(self._get(f"/repositories/{repo}").json())

    def list_branches(self, repo: str, page_size: int = 1000) -> list[SourceRef]:
        return [SourceRef(r["id"], r["commit_id"])
                for r in self._pages(f"/repositories/{repo}/branches", page_size)]

    def list_tags(self, repo: str, page_size: int = 1000) -> list[SourceRef]:
        return [SourceRef(r["id"], r["commit_id"])
                for r in self._pages(f"/repositories/{repo}/tags", page_size)]

    def get_commit(self, repo: str, commit: str) -> CommitRecord:
        return commit_from_json(self._get(f"/repositories/{repo}/commits/{commit}").json())

    def new_commits(self, repo: str, head: str, known: Callable[[str], bool],
                    page_size: int = 1000) -> list[CommitRecord]:
        """Commits reachable from ``head`` that are not ``known``, oldest first.

        Relies on the invariant that a known commit's ancestors are all known (the
        sidecar writes records oldest first), and on the log being in topological
        order, so the walk stops as soon as every needed parent has been seen.
        """
        if known(head):
            return []
        needed = {head}
        found: list[CommitRecord] = []
        for data in self._pages(f"/repositories/{repo}/refs/{head}/commits", page_size):
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
        return self._get(f"/repositories/{repo}/refs/{ref}/objects", path=path).content

    def read_metadata_file(self, repo: str, file_id: str) -> bytes:
        """A range or metarange file of the repository (by id)."""
        return self._get(f"/repositories/{repo}/metadata/files/{file_id}").content


def _message(resp: httpx.Response) -> str:
    try:
        return str(resp.json().get("message", resp.text))
    except ValueError:
        return resp.text[:200]
