"""The shard keeper on a real mirrors table: who takes, keeps and lets go of the shards
of a region's mirrors (``replication.shards``)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from mirrors_db import open_mirrors_table
from mirrors_db.models import RowKind
from mirrors_db.table import ChangeFeed, MirrorsTable
from replication.shards import SHARDS, ShardKeeper, address_of, assigned, owner_id, shard_of

ORG = "org"


@pytest.fixture
def table(tmp_path: Path) -> Iterator[MirrorsTable]:
    with open_mirrors_table({"type": "sqlite", "sqlite": {"path": str(tmp_path / "m.db")}}) as t:
        yield t


class Replica:
    """A keeper, the peers it has heard of, and the shards it took."""

    def __init__(self, table: MirrorsTable, owner: str, ttl: float = 30.0) -> None:
        self.peers: set[str] = set()
        self.taken: list[int] = []
        self.keeper = ShardKeeper(table, ORG, "west", owner, ttl, lambda: set(self.peers),
                                  self.taken.append)


def _hear(feed: ChangeFeed, keeper: ShardKeeper) -> None:
    """Tell ``keeper`` the lease events of ``feed`` so far (as the sidecar's feed does)."""
    while (event := feed.get(timeout=0.5)) is not None:
        keeper.changed(event)


def _mirror_in(shard: int) -> str:
    return next(m for m in (f"mirror-{i}" for i in range(10_000)) if shard_of(m) == shard)


def test_shards_fall_evenly_to_the_live_replicas() -> None:
    for n in (1, 2, 3, 5):
        owners = [f"r{i}" for i in range(n)]
        counts = Counter(assigned(k, owners) for k in range(SHARDS))
        assert set(counts) == set(owners)
        assert max(counts.values()) - min(counts.values()) <= 1
        # the same whatever order the replicas are listed in
        assert [assigned(k, reversed(owners)) for k in range(SHARDS)] == [
            assigned(k, owners) for k in range(SHARDS)]
    ids = Counter(shard_of(f"m{i}") for i in range(8_000))
    assert set(ids) == set(range(SHARDS)) and min(ids.values()) > 800


def test_an_owner_id_says_where_to_reach_the_replica() -> None:
    owner = owner_id("host:12:ab12cd34", "http://10.0.0.7:8008")
    assert owner == "host:12:ab12cd34@http://10.0.0.7:8008"
    assert address_of(owner) == "http://10.0.0.7:8008"
    assert owner_id("replica-a", None) == "replica-a"
    assert address_of("replica-a") is None
    assert address_of("user@host") is None  # not an address


def test_a_second_replica_takes_its_half_once_the_first_lets_it_go(
        table: MirrorsTable) -> None:
    a, b = Replica(table, "a"), Replica(table, "b")
    a.keeper.keep()
    assert a.keeper.held() == list(range(SHARDS)) and a.taken == list(range(SHARDS))

    # b hears of a before a hears of b: b's shards are a's until a lets them go
    b.peers = {"a"}
    b.keeper.keep()
    assert b.keeper.held() == [] and b.taken == []
    assert b.keeper.holder(_mirror_in(1)) == "a"  # learnt when it was refused

    with table.watch(ORG, frozenset({RowKind.LEASE}), poll_interval=0.05) as feed:
        a.peers = {"b"}
        a.keeper.keep()
        _hear(feed, b.keeper)  # that a let them go: b takes them at once
    b.keeper.keep()
    assert a.keeper.held() == [k for k in range(SHARDS) if assigned(k, "ab") == "a"]
    assert b.keeper.held() == [k for k in range(SHARDS) if assigned(k, "ab") == "b"]
    assert b.taken == b.keeper.held()
    for k in range(SHARDS):
        lease = table.get_lease(ORG, f"west/shard/{k}")
        assert lease is not None and lease.owner == assigned(k, "ab")

    # a round may run only where its mirror's shard is held
    for k in range(SHARDS):
        mirror = _mirror_in(k)
        with a.keeper.round(mirror) as on_a, b.keeper.round(mirror) as on_b:
            assert (on_a, on_b) == (assigned(k, "ab") == "a", assigned(k, "ab") == "b")

    # b stops: its shards go back to a
    b.keeper.release_all()
    a.peers = set()
    a.keeper.keep()
    assert a.keeper.held() == list(range(SHARDS))


def test_a_shard_is_let_go_only_once_its_rounds_end(table: MirrorsTable) -> None:
    a, b = Replica(table, "a"), Replica(table, "b")
    a.keeper.keep()
    shard = next(k for k in range(SHARDS) if assigned(k, "ab") == "b")
    mirror = _mirror_in(shard)
    with a.keeper.round(mirror) as ok:
        assert ok
        a.peers, b.peers = {"b"}, {"a"}
        a.keeper.keep()  # the shard falls to b, but a round of its mirror runs
        assert a.keeper.holds(shard)
        lease = table.get_lease(ORG, f"west/shard/{shard}")
        assert lease is not None and lease.owner == "a"
        with a.keeper.round(_mirror_in(shard)) as again:
            assert not again  # no new round begins on a shard being let go
        b.keeper.keep()
        assert not b.keeper.holds(shard)
    with table.watch(ORG, frozenset({RowKind.LEASE}), poll_interval=0.05) as feed:
        a.keeper.keep()
        assert not a.keeper.holds(shard)
        _hear(feed, b.keeper)
    b.keeper.keep()
    assert b.keeper.holds(shard) and shard in b.taken


def test_a_dead_replicas_shards_are_taken_once_their_leases_run_out(
        table: MirrorsTable) -> None:
    a, b = Replica(table, "a", ttl=1.0), Replica(table, "b", ttl=1.0)
    a.keeper.keep()
    b.keeper.keep()  # b thinks it is alone, but a holds every shard
    assert b.keeper.held() == []
    mirror = _mirror_in(3)
    with a.keeper.round(mirror) as ok:
        assert ok
    time.sleep(1.1)  # a dies: it renews nothing
    with a.keeper.round(mirror) as ok:
        # a round at a replica that missed renewing renews first; here b has not taken
        # the shard yet, so a still may
        assert ok
    time.sleep(1.1)
    b.keeper.keep()
    assert b.keeper.held() == list(range(SHARDS))
    with a.keeper.round(mirror) as ok:
        assert not ok  # its lease ran out and b holds it now
    assert a.keeper.holder(mirror) == "b"


def test_stored_leases_name_the_shard_and_where_its_holder_listens(
        table: MirrorsTable) -> None:
    a = Replica(table, owner_id("a", "http://127.0.0.1:1"))
    a.keeper.keep()
    for k in range(SHARDS):
        lease = table.get_lease(ORG, f"west/shard/{k}")
        assert lease is not None and address_of(lease.owner) == "http://127.0.0.1:1"


def test_the_keeper_stops_when_told_not_after_its_period(table: MirrorsTable) -> None:
    a = Replica(table, "a", ttl=600.0)  # a pass every 5 s
    stop = threading.Event()
    thread = threading.Thread(target=a.keeper.run, args=(stop,), daemon=True)
    thread.start()
    while a.keeper.held() != list(range(SHARDS)):
        time.sleep(0.01)
    stop.set()
    a.keeper.poke()  # what the sidecar's stop() does
    thread.join(timeout=2.5)
    assert not thread.is_alive()
