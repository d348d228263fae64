"""Replicas say they live (a membership lease each) and share the region's mirrors out
by shard: a replica runs the rounds of the mirrors whose shard lease it holds, and passes
news of any other mirror's move on to the shard's holder. A lone replica holds every
shard; the leases cost the table per period, never per commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lakefs_testing.regions import (
    ORG,
    Region,
    commit,
    create_mirror,
    create_source,
    mirror_head,
    two_regions,
    upload,
)
from lakefs_testing.waiting import wait_for
from mirrors_db import open_mirrors_table
from replication.shards import SHARDS, shard_of
from replication.sidecar import Sidecar
from tests.replication.traffic import commit_and_follow


def _lease_requests(region: Region) -> float:
    total = 0.0
    for handle in region.sidecars:
        for metric in handle.sidecar.metrics.table_requests.collect():
            total += sum(s.value for s in metric.samples if s.name.endswith("_total")
                         and s.labels["operation"] in ("acquire_lease", "release_lease"))
    return total


def _counter(sidecar: Sidecar, name: str) -> float:
    return sum(s.value for m in getattr(sidecar.metrics, name).collect()
               for s in m.samples if s.name.endswith("_total"))


def test_replicas_share_the_shards_and_pass_news_on_to_the_holder(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1m") as (east, west):
        create_source(east)
        mirror = create_mirror(east)
        lone = west.sidecars[0].sidecar
        wait_for(lambda: lone.shards.held() == list(range(SHARDS)), 30,
                 what="the lone replica holds every shard")
        commit_and_follow(east, west, 1, "a")
        before = _lease_requests(west)
        commit_and_follow(east, west, 4, "b")
        # no lease is taken or let go per commit (each shard's is renewed every third
        # of its term, a minute here)
        assert _lease_requests(west) - before <= SHARDS
        shard = shard_of(mirror["id"])
        with open_mirrors_table(sqlite_mirrors) as table:
            lease = table.get_lease(ORG, f"west/shard/{shard}")
            assert lease is not None and lease.owner == lone.owner
            assert table.get_lease(ORG, f"west/replica/{lone.owner}") is not None
            assert table.get_lease(ORG, f"west/mirror/{mirror['id']}") is None

        second = west.start_sidecar().sidecar
        wait_for(lambda: len(lone.shards.held()) == len(second.shards.held()) == SHARDS // 2
                 and set(lone.shards.held()) | set(second.shards.held()) == set(range(SHARDS)),
                 30, what="the two replicas share the shards out")
        holder, other = (lone, second) if lone.shards.holds(shard) else (second, lone)
        wait_for(lambda: other.shards.holder(mirror["id"]) == holder.owner, 30,
                 what="the other replica knows who holds the mirror's shard")
        promoted = _counter(holder, "promotions"), _counter(other, "promotions")

        # a move told to the replica that does not hold the mirror's shard: passed on,
        # and followed at once by the holder (no replica polls the source: 1m)
        upload(east, "src", "main", "told-elsewhere", b"x")
        head = commit(east, "src", "main", "told elsewhere")
        other.on_ref_events([{"repository": "src"}], "east")
        wait_for(lambda: mirror_head(west, "src-mirror", "main") == head, 30,
                 what="the holder follows news passed on to it")
        assert _counter(other, "passed_on") >= 1
        assert _counter(holder, "promotions") > promoted[0]
        assert _counter(other, "promotions") == promoted[1]  # no round of it runs there
        commit_and_follow(east, west, 2, "c")

        # the holder goes: the other takes its shards (let go as it stops) and follows
        handle = next(h for h in west.sidecars if h.sidecar is holder)
        west.sidecars.remove(handle)
        handle.stop()
        wait_for(lambda: other.shards.held() == list(range(SHARDS)), 30,
                 what="the remaining replica takes every shard")
        if handle.port == west.sidecar_port:
            west.start_sidecar(port=handle.port)  # where the server sends its events
        commit_and_follow(east, west, 2, "d")
