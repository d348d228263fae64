"""The commit sensor's settings. How often a source is read without events
(process_branches_duration); and, seen at a proxy in front of the source server, the
page sizes (list_branch_page_size, log_commit_page_size) and how many mirrors are
read (branches_scanner_concurrency_limit) and validated (validator.num_workers) at
once."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from lakefs_core.ref_events import RefEventNotifier
from lakefs_testing.regions import (
    Region,
    commit,
    create_mirror,
    create_source,
    mirror_head,
    two_regions,
    upload,
)
from lakefs_testing.waiting import wait_for
from tests.replication.proxy import RecordingProxy, recording_proxy
from tests.replication.settings import configure, stays_false

NEVER = "1h"


@pytest.mark.parametrize(("interval", "advances"), [("300ms", True), (NEVER, False)])
def test_without_events_a_source_is_read_every_process_branches_duration(
        tmp_path: Path, sqlite_mirrors: dict[str, Any], interval: str, advances: bool) -> None:
    with two_regions(tmp_path, sqlite_mirrors, sidecars=False) as (east, west):
        configure(west, commit_sensor={"process_branches_duration": interval},
                  mirrors_manager={"process_mirrors_interval_duration": NEVER})
        east.start_sidecar()
        west.start_sidecar()
        create_source(east)
        upload(east, "src", "main", "a", b"1")
        c1 = commit(east, "src", "main", "c1")
        create_mirror(east)
        wait_for(lambda: mirror_head(west, "src-mirror", "main") == c1, 30,
                 what="the mirror's first round")
        # the source's server no longer tells of branch moves: only the sensor sees them
        listeners = east.graveler.ref_listeners
        listeners[:] = [f for f in listeners if not isinstance(f, RefEventNotifier)]
        upload(east, "src", "main", "b", b"2")
        c2 = commit(east, "src", "main", "c2")
        if advances:
            wait_for(lambda: mirror_head(west, "src-mirror", "main") == c2, 30,
                     what="c2 sensed and promoted")
        else:
            assert stays_false(lambda: mirror_head(west, "src-mirror", "main") == c2, 2.0)


@contextmanager
def regions_behind_proxy(tmp: Path, mirrors: dict[str, Any], hold: Callable[[str, str], bool],
                         **west_settings: Any) -> Iterator[tuple[Region, Region, RecordingProxy]]:
    """Two regions (``builtin`` copies through the source API); the west sidecar reads
    the east server through a recording proxy."""
    with two_regions(tmp, mirrors, mode="builtin", sidecars=False) as (east, west), \
            recording_proxy(east.server.endpoint, hold) as proxy:
        configure(west, dst_endpoints={"east": proxy.url},
                  mirrors_manager={"process_mirrors_interval_duration": NEVER},
                  **west_settings)
        east.start_sidecar()
        west.start_sidecar()
        yield east, west, proxy


def repository_of(path: str) -> str:
    """``/api/v1/repositories/<repo>/...`` -> ``<repo>``."""
    return path.split("/")[4]


def mirrored_sources(east: Region, n: int) -> list[tuple[str, str]]:
    """``n`` source repositories with a commit each, and a mirror of each: (mirror, head)."""
    out = []
    for i in range(n):
        repo = f"src{i}"
        create_source(east, repo)
        upload(east, repo, "main", "a.txt", repo.encode())
        out.append((f"{repo}-mirror", commit(east, repo, "main", "one")))
        create_mirror(east, repo, f"{repo}-mirror", f"local://{repo}-mirror")
    return out


def test_page_sizes_of_branch_and_commit_listings(tmp_path: Path,
                                                  sqlite_mirrors: dict[str, Any]) -> None:
    with regions_behind_proxy(tmp_path, sqlite_mirrors, lambda _m, _p: False,
                              commit_sensor={"list_branch_page_size": 1,
                                             "log_commit_page_size": 2}) as (east, west, proxy):
        create_source(east)
        heads = {}
        for b in ("b1", "b2"):
            with east.client() as c:
                assert c.post("/api/v1/repositories/src/branches",
                              json={"name": b, "source": "main"}).status_code == 201
        for n in range(4):
            upload(east, "src", "main", f"f{n}", b"x")
            heads["main"] = commit(east, "src", "main", f"c{n}")
        create_mirror(east)
        wait_for(lambda: mirror_head(west, "src-mirror", "main") == heads["main"]
                 and mirror_head(west, "src-mirror", "b2"), 60, what="three branches mirrored")
        branch_pages = proxy.requests("GET", "/repositories/src/branches")
        assert len(branch_pages) >= 3  # three branches, one a page
        assert {tuple(p.query["amount"]) for p in branch_pages} == {("1",)}
        log_pages = [s for s in proxy.requests("GET", "/commits") if "/refs/" in s.path]
        assert len(log_pages) >= 3  # five commits of main, two a page
        assert {tuple(p.query["amount"]) for p in log_pages} == {("2",)}


def test_sources_read_at_once_are_bounded(tmp_path: Path,
                                          sqlite_mirrors: dict[str, Any]) -> None:
    """branches_scanner_concurrency_limit: 2 (above num_workers: 1): two at once."""
    def branch_listing(method: str, path: str) -> bool:
        return method == "GET" and path.endswith("/branches")

    with regions_behind_proxy(tmp_path, sqlite_mirrors, branch_listing,
                              commit_sensor={"branches_scanner_concurrency_limit": 2,
                                             "process_branches_duration": NEVER},
                              validator={"num_workers": 1}) as (east, west, proxy):
        mirrors = mirrored_sources(east, 3)
        wait_for(lambda: len(proxy.held()) == 2, 30, what="two sources read at once")
        assert stays_false(lambda: len(proxy.held()) > 2, 1.0)
        proxy.release()
        for name, head in mirrors:
            wait_for(lambda n=name, h=head: mirror_head(west, n, "main") == h, 30,
                     what=f"{name} promoted")


def test_validations_at_once_are_bounded(tmp_path: Path,
                                         sqlite_mirrors: dict[str, Any]) -> None:
    """validator.num_workers: 2 (above branches_scanner_concurrency_limit: 1): two
    validations at once (each waits on its first copy from the source)."""
    def metadata_copy(method: str, path: str) -> bool:
        return method == "GET" and "/metadata/files/" in path

    def validating() -> set[str]:
        return {repository_of(p) for p in proxy.held()}

    with regions_behind_proxy(tmp_path, sqlite_mirrors, metadata_copy,
                              commit_sensor={"branches_scanner_concurrency_limit": 1,
                                             "process_branches_duration": NEVER},
                              validator={"num_workers": 2}) as (east, west, proxy):
        mirrors = mirrored_sources(east, 3)
        wait_for(lambda: len(validating()) == 2, 30, what="two validations at once")
        assert stays_false(lambda: len(validating()) > 2, 1.0)
        proxy.release()
        for name, head in mirrors:
            wait_for(lambda n=name, h=head: mirror_head(west, n, "main") == h, 30,
                     what=f"{name} promoted")
