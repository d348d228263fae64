"""What a sidecar asks of the mirrors table while commits are followed: helpers of the
tests that count it."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from lakefs_testing.regions import Region, commit, mirror_head, upload
from lakefs_testing.waiting import wait_for


def table_requests(region: Region) -> dict[str, float]:
    """The region's first sidecar's mirrors-table requests so far, by operation."""
    r = httpx.get(region.sidecars[0].url + "/metrics", timeout=10)
    assert r.status_code == 200
    return {s.labels["operation"]: s.value
            for f in text_string_to_metric_families(r.text) for s in f.samples
            if s.name == "replication_mirrors_table_requests_total"}


def commit_and_follow(east: Region, west: Region, n: int, tag: str = "") -> None:
    """Commit ``n`` times to east's ``src`` main, each followed by west's mirror (told by
    the commit's event) before the next."""
    for i in range(n):
        upload(east, "src", "main", f"k{tag}{i}", str(i).encode())
        ci = commit(east, "src", "main", f"c{tag}{i}")
        wait_for(lambda ci=ci: mirror_head(west, "src-mirror", "main") == ci, 30,
                 what=f"c{tag}{i}")
