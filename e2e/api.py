"""A small REST client of one region: the lakeFS API and the mirrors API.

Everything the end-to-end runs do goes through HTTP, like a user's client would; the
processes under test are separate, so there is no other way in. The calls go through
the product's REST client (:mod:`lakefs_core.client`), without retries: a run sees
every failure. Errors come back as :class:`ApiError` carrying the status code and the
server's message.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

from lakefs_core.client import ApiError, RestClient

MIRRORS = "/service/replication/v1/repositories"
GROUPS = "/service/replication/v1/groups"


class RegionClient:
    """Basic-auth client of one region's server (``/api/v1`` and the mirrors proxy).

    Args:
        endpoint: ``http://host:port`` of the server.
        access_key_id: lakeFS access key id.
        secret_access_key: its secret.
        timeout: seconds per request.
    """

    def __init__(self, endpoint: str, access_key_id: str, secret_access_key: str, *,
                 timeout: float = 30.0) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.credentials = (access_key_id, secret_access_key)
        self._rest = RestClient(self.endpoint, access_key_id, secret_access_key,
                                timeout=timeout, attempts=1)

    def close(self) -> None:
        self._rest.close()

    def __enter__(self) -> RegionClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ plumbing
    def request(self, method: str, path: str, *, expect: tuple[int, ...] = (200,),
                **kwargs: Any) -> httpx.Response:
        """Send a request; any status not in ``expect`` raises :class:`ApiError`."""
        return self._rest.request(method, path, ok=expect, retry=False, **kwargs)

    def _pages(self, path: str, params: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        return self._rest.pages(path, params=params)

    def healthy(self) -> bool:
        """Whether the server answers its health check."""
        try:
            self._rest.request("GET", "/_health", ok=(200, 204), retry=False, timeout=2.0)
        except ApiError:
            return False
        return True

    # -------------------------------------------------------- repositories
    def create_repository(self, name: str, storage_namespace: str,
                          default_branch: str = "main") -> dict[str, Any]:
        return dict(self.request("POST", "/api/v1/repositories", expect=(201,), json={
            "name": name, "storage_namespace": storage_namespace,
            "default_branch": default_branch}).json())

    def get_repository(self, name: str) -> dict[str, Any]:
        return dict(self.request("GET", f"/api/v1/repositories/{name}").json())

    # ------------------------------------------------------------ objects
    def upload(self, repo: str, branch: str, path: str, data: bytes) -> dict[str, Any]:
        return dict(self.request("POST", f"/api/v1/repositories/{repo}/branches/{branch}/objects",
                                 expect=(201,), params={"path": path}, content=data).json())

    def delete_object(self, repo: str, branch: str, path: str) -> None:
        self.request("DELETE", f"/api/v1/repositories/{repo}/branches/{branch}/objects",
                     expect=(204,), params={"path": path})

    def list_objects(self, repo: str, ref: str) -> list[dict[str, Any]]:
        """Every object at ``ref`` (stats: path, checksum, size_bytes, physical_address)."""
        return list(self._pages(f"/api/v1/repositories/{repo}/refs/{ref}/objects/ls",
                                {"user_metadata": "false"}))

    def read_object(self, repo: str, ref: str, path: str) -> bytes:
        return self.request("GET", f"/api/v1/repositories/{repo}/refs/{ref}/objects",
                            params={"path": path}).content

    # -------------------------------------------------- commits and refs
    def commit(self, repo: str, branch: str, message: str) -> str:
        return str(self.request("POST", f"/api/v1/repositories/{repo}/branches/{branch}/commits",
                                expect=(201,), json={"message": message}).json()["id"])

    def get_commit(self, repo: str, commit_id: str) -> dict[str, Any]:
        return dict(self.request("GET", f"/api/v1/repositories/{repo}/commits/{commit_id}").json())

    def branches(self, repo: str) -> dict[str, str]:
        """Branch name -> head commit id."""
        refs = self._pages(f"/api/v1/repositories/{repo}/branches")
        return {r["id"]: r["commit_id"] for r in refs}

    def branch_head(self, repo: str, branch: str) -> str:
        """The commit ``branch`` points at (one read of one branch)."""
        return str(self.request(
            "GET", f"/api/v1/repositories/{repo}/branches/{branch}").json()["commit_id"])

    def tags(self, repo: str) -> dict[str, str]:
        """Tag name -> commit id."""
        return {r["id"]: r["commit_id"] for r in self._pages(f"/api/v1/repositories/{repo}/tags")}

    def create_branch(self, repo: str, name: str, source: str) -> None:
        self.request("POST", f"/api/v1/repositories/{repo}/branches", expect=(201,),
                     json={"name": name, "source": source})

    def delete_branch(self, repo: str, name: str) -> None:
        self.request("DELETE", f"/api/v1/repositories/{repo}/branches/{name}", expect=(204,))

    def hard_reset(self, repo: str, branch: str, ref: str) -> None:
        self.request("PUT", f"/api/v1/repositories/{repo}/branches/{branch}/hard_reset",
                     expect=(204,), params={"ref": ref})

    def merge(self, repo: str, source: str, destination: str, message: str = "",
              strategy: str | None = None) -> str:
        """Merge ``source`` into ``destination``; ``strategy``: dest-wins or source-wins."""
        body: dict[str, str] = {"message": message} if message else {}
        if strategy:
            body["strategy"] = strategy
        return str(self.request("POST", f"/api/v1/repositories/{repo}/refs/{source}/merge/"
                                f"{destination}", json=body).json()["reference"])

    def create_tag(self, repo: str, tag: str, ref: str) -> None:
        self.request("POST", f"/api/v1/repositories/{repo}/tags", expect=(201,),
                     json={"id": tag, "ref": ref})

    def delete_tag(self, repo: str, tag: str) -> None:
        self.request("DELETE", f"/api/v1/repositories/{repo}/tags/{tag}", expect=(204,))

    # ------------------------------------------------------------- mirrors
    def create_mirror(self, repo: str, name: str, region: str,
                      storage_namespace: str) -> dict[str, Any]:
        return dict(self.request("POST", f"{MIRRORS}/{repo}/mirrors", expect=(201,), json={
            "name": name, "region": region, "storage_namespace": storage_namespace}).json())

    def list_mirrors(self, repo: str) -> list[dict[str, Any]]:
        return list(self._pages(f"{MIRRORS}/{repo}/mirrors"))

    def get_mirror(self, repo: str, mirror_id: str) -> dict[str, Any]:
        return dict(self.request("GET", f"{MIRRORS}/{repo}/mirrors/{mirror_id}").json())

    def mirror_status(self, repo: str, mirror_id: str) -> dict[str, Any]:
        """The mirror and per-branch progress (source/mirror head, pending, missing, lag)."""
        return dict(self.request("GET", f"{MIRRORS}/{repo}/mirrors/{mirror_id}/status").json())

    def delete_mirror(self, repo: str, mirror_id: str) -> None:
        self.request("DELETE", f"{MIRRORS}/{repo}/mirrors/{mirror_id}", expect=(204,))

    def detach_mirror(self, repo: str, mirror_id: str) -> dict[str, Any]:
        return dict(self.request("POST", f"{MIRRORS}/{repo}/mirrors/{mirror_id}/detach").json())

    def switchover(self, repo: str, mirror_id: str, timeout_seconds: float) -> httpx.Response:
        """Ask for a planned switchover; the answer is 200 (done) or 409 (did not catch up
        in time, nothing changed)."""
        return self._handover("switchover", repo, mirror_id, timeout_seconds)

    def failback(self, repo: str, mirror_id: str, timeout_seconds: float) -> httpx.Response:
        """Ask for the failback of a detached mirror; 200 (done, ``kept`` heads and the
        reverse ``mirror``) or 409 (a head could not be kept)."""
        return self._handover("failback", repo, mirror_id, timeout_seconds)

    def _handover(self, action: str, repo: str, mirror_id: str,
                  timeout_seconds: float) -> httpx.Response:
        return self.request("POST", f"{MIRRORS}/{repo}/mirrors/{mirror_id}/{action}",
                            expect=(200, 409), json={"timeout_seconds": timeout_seconds},
                            timeout=timeout_seconds + 60)

    # -------------------------------------------------------------- groups
    def create_group(self, name: str, region: str,
                     members: list[tuple[str, str]]) -> dict[str, Any]:
        """A mirror group of ``members`` (mirror id, branch) into ``region``."""
        return dict(self.request("POST", GROUPS, expect=(201,), json={
            "name": name, "region": region,
            "members": [{"mirror_id": m, "branch": b} for m, b in members]}).json())

    def take_cut(self, group_id: str) -> dict[str, Any]:
        """Ask the group's source region for a cut of the member heads as they are."""
        return dict(self.request("POST", f"{GROUPS}/{group_id}/cuts", expect=(201,)).json())

    def group_status(self, group_id: str) -> dict[str, Any]:
        """The cut served in this region, the one waiting and what for, the lag."""
        return dict(self.request("GET", f"{GROUPS}/{group_id}/status").json())

    def log(self, repo: str, ref: str) -> Iterator[dict[str, Any]]:
        """Every commit reachable from ``ref``, newest first."""
        return self._pages(f"/api/v1/repositories/{repo}/refs/{ref}/commits")


def read_metrics(endpoint: str, *, timeout: float = 5.0) -> dict[str, float]:
    """A sidecar's Prometheus counters and gauges, summed over their labels.

    Args:
        endpoint: ``http://host:port`` of a replication service (``/metrics`` is read).

    Returns:
        Sample name (``replication_promotions_total``, ...) -> sum over all labels; empty
        when the service does not answer.
    """
    from prometheus_client.parser import text_string_to_metric_families

    try:
        text = httpx.get(f"{endpoint.rstrip('/')}/metrics", timeout=timeout).text
    except httpx.HTTPError:
        return {}
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample.name] = out.get(sample.name, 0.0) + float(sample.value)
    return out
