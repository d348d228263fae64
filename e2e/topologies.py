"""The topologies seed 003 promises, with real processes and the invariants checked:
``python -m e2e.topologies [one-to-many|bidirectional|group-two-regions ...]``.

- **one-to-many**: one source repository in ``east`` mirrored to ``west`` and
  ``north`` under the same name; each destination promotes on its own: with north's
  sidecar killed, west still follows every commit while north serves what it had, and
  north catches up once restarted; then west's server dies and north goes on.
- **bidirectional**: ``east`` is the source of ``orders`` (mirrored to west) and the
  destination of ``users`` (a source in west), one mirrors table between them; both
  sources commit in turns, each region's sidecar is killed once, both mirrors follow.
- **group-two-regions**: ``features`` and ``labels`` in ``east`` mirrored to ``west``
  and ``north``, a group of both in each destination region; a pipeline commits
  features then labels. With the object copies of features to north held back, north
  serves neither new commit while west serves both; released, north serves both at
  once. I8 is checked all along in both regions (and every cut against the source's
  history).

I1-I4 are checked for every mirror after every step and while processes are down
(:class:`~e2e.invariants.ApiMirrorChecker`), I6 on the status reads. Each scenario
returns its figures and raises :class:`AssertionError` (an
:class:`~e2e.invariants.InvariantViolation` for a broken invariant) when it fails.
Exit status: 0 every scenario passed, 1 one failed.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from e2e.api import RegionClient
from e2e.cluster import Cluster, ClusterSpec, cut_reader, scratch_dir, start_cluster
from e2e.invariants import (
    ApiMirrorChecker,
    CheckerStats,
    GroupCutChecker,
    GroupMemberRef,
    InvariantViolation,
    SourceTimeline,
)
from e2e.processes import terminate_as_exit
from e2e.workload import SourceDriver
from lakefs_testing.replicator import FaultyReplicator
from lakefs_testing.waiting import wait_for

if TYPE_CHECKING:
    from mirrors_db.table import MirrorsTable

SYNC_TIMEOUT = 90.0


@dataclass
class Mirrored:
    """One mirror the scenario watches, with the id its status is read by."""

    checker: ApiMirrorChecker
    mirror_id: str
    #: the source region, for I6 while its server is down
    source_region: str


@dataclass
class Watch:
    """Every mirror and group of a scenario, checked together.

    Args:
        cluster: the running cluster.
    """

    cluster: Cluster
    clients: dict[str, RegionClient] = field(default_factory=dict)
    mirrors: list[Mirrored] = field(default_factory=list)
    groups: list[GroupCutChecker] = field(default_factory=list)
    violations: list[InvariantViolation] = field(default_factory=list)
    stats: CheckerStats = field(default_factory=CheckerStats)
    timeline: SourceTimeline = field(default_factory=SourceTimeline)
    #: region -> when its server was killed, while it is down
    down_since: dict[str, float] = field(default_factory=dict)
    _table: MirrorsTable | None = None

    def __post_init__(self) -> None:
        self.clients = {name: r.client() for name, r in self.cluster.regions.items()}

    def close(self) -> None:
        for c in self.clients.values():
            c.close()
        if self._table is not None:
            self._table.close()

    def source(self, region: str, repo: str, seed: int) -> SourceDriver:
        """A driver of a new repository in ``region`` (its moves go to the timeline)."""
        driver = SourceDriver(self.clients[region], repo, None, random.Random(seed),
                              observers=[self.timeline.follow(repo)])
        driver.create_repository(self.cluster.regions[region].namespace(repo))
        driver.write_commit("main", files=3)
        return driver

    def mirror(self, driver: SourceDriver, source_region: str, name: str,
               region: str) -> Mirrored:
        """Mirror ``driver``'s repository into ``region`` as ``name``, checked from now."""
        checker, mirror_id = driver.mirror_to(
            self.clients[region], name, region, self.cluster.regions[region].namespace(name),
            collect=True, violations=self.violations, stats=self.stats)
        m = Mirrored(checker, mirror_id, source_region)
        self.mirrors.append(m)
        return m

    def group(self, name: str, source_region: str, region: str,
              members: list[tuple[Mirrored, str]]) -> GroupCutChecker:
        """A group of ``members`` (mirror, branch) into ``region``, I8 checked once armed."""
        created = self.clients[source_region].create_group(
            name, region, [(m.mirror_id, branch) for m, branch in members])
        if self._table is None:  # the group's cuts are read from the shared table
            self._table = self.cluster.open_mirrors_table()
        table = self._table
        group = GroupCutChecker(
            self.clients[region], region, str(created["id"]),
            [GroupMemberRef(m.mirror_id, m.checker.source_repo, m.checker.mirror_repo, b)
             for m, b in members], cut_reader(table, str(created["id"])), self.timeline,
            violations=self.violations, stats=self.stats)
        self.groups.append(group)
        return group

    # ------------------------------------------------------------- checking
    def check(self) -> None:
        for m in self.mirrors:
            m.checker.check()
        for g in self.groups:
            g.check()

    def check_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        self.check()
        while time.monotonic() < deadline:
            time.sleep(0.05)
            self.check()

    def check_statuses(self) -> None:
        for m in self.mirrors:
            m.checker.check_status(m.mirror_id,
                                   source_down_since=self.down_since.get(m.source_region))

    def wait_in_sync(self, what: str, mirrors: list[Mirrored] | None = None) -> None:
        for m in mirrors if mirrors is not None else self.mirrors:
            wait_for(m.checker.in_sync, SYNC_TIMEOUT, 0.1, what=f"{what}: "
                     f"{m.checker.mirror_repo} in {m.checker.mirror.endpoint}",
                     check=self.check)
        self.check()

    def kill(self, region: str, what: str) -> None:
        """``kill -9`` a region's ``server`` or (first) ``sidecar``."""
        r = self.cluster.regions[region]
        (r.server if what == "server" else r.sidecars[0]).kill()
        if what == "server":
            self.down_since[region] = time.time()

    def restart(self, region: str) -> None:
        self.cluster.regions[region].start()
        self.down_since.pop(region, None)

    def finish(self) -> dict[str, Any]:
        """Probe I4 on every mirror, raise the first violation; the run's figures."""
        for m in self.mirrors:
            m.checker.probe_read_only()
        self.check_statuses()
        if self.violations:
            raise self.violations[0]
        s = self.stats
        return {"mirrors": len(self.mirrors), "groups": len(self.groups),
                "checks": s.checks, "commits_verified": s.commits_verified,
                "objects_compared": s.objects_compared, "status_reads": s.status_reads,
                "group_reads": s.group_reads, "cuts_checked": s.cuts_checked,
                "violations": 0}


@contextlib.contextmanager
def watching(cluster: Cluster) -> Iterator[Watch]:
    watch = Watch(cluster)
    try:
        yield watch
    finally:
        watch.close()


# -------------------------------------------------------------- the scenarios
ONE_TO_MANY = ClusterSpec(regions=3, policy="narrow", source_repository="src",
                          mirror_repository="src-mirror")


def one_to_many(cluster: Cluster) -> dict[str, Any]:
    """One source, two destination regions, each promoting on its own."""
    with watching(cluster) as w:
        src = w.source("east", "src", seed=1)
        west = w.mirror(src, "east", "src-mirror", "west")
        north = w.mirror(src, "east", "src-mirror", "north")
        w.wait_in_sync("first promotions")
        # north's sidecar is down: west follows every commit, north serves what it had
        held = w.clients["north"].branch_head("src-mirror", "main")
        w.kill("north", "sidecar")
        for _ in range(3):
            src.write_commit("main", files=2)
            w.check()
        src.create_branch("etl", "main")
        src.write_commit("etl", files=2)
        w.wait_in_sync("west without north", [west])
        w.check_statuses()
        assert w.clients["north"].branch_head("src-mirror", "main") == held, \
            "north's mirror moved while north's sidecar was down"
        w.restart("north")
        w.wait_in_sync("north restarted", [north])
        # west's server dies: north goes on following the source
        w.kill("west", "server")
        src.write_commit("main", files=2)
        w.wait_in_sync("north while west is down", [north])
        w.restart("west")
        w.wait_in_sync("both after the faults")
        return w.finish()


BIDIRECTIONAL = ClusterSpec(policy="narrow", source_repository="orders",
                            mirror_repository="orders-mirror",
                            also_mirrored=(("users", "users-mirror", "east"),))


def bidirectional(cluster: Cluster) -> dict[str, Any]:
    """Each region the source of one repository and the destination of the other."""
    with watching(cluster) as w:
        orders = w.source("east", "orders", seed=2)
        users = w.source("west", "users", seed=3)
        w.mirror(orders, "east", "orders-mirror", "west")
        w.mirror(users, "west", "users-mirror", "east")
        w.wait_in_sync("first promotions")
        for round_, victim in enumerate(("east", "west", None)):
            if victim is not None:  # each region's sidecar: source of one, mirror of other
                w.kill(victim, "sidecar")
            for driver in (orders, users, orders):
                driver.write_commit("main", files=2)
                w.check()
            if round_ == 0:
                users.create_branch("dev", "main")
                users.write_commit("dev", files=1)
                orders.tag("v1", "main")
            w.check_for(0.5)
            if victim is not None:
                w.restart(victim)
            w.wait_in_sync(f"round {round_ + 1}")
        w.check_statuses()
        return w.finish()


GROUP_TWO_REGIONS = ClusterSpec(
    regions=3, policy="narrow", replication="native", source_repository="features",
    mirror_repository="features",
    also_mirrored=(("labels", "labels", "west"), ("labels", "labels", "north")))


def group_two_regions(cluster: Cluster) -> dict[str, Any]:
    """A group of two repositories mirrored to two regions, a group in each."""
    repos = ("features", "labels")
    hold = {"on": False}
    replicators: list[FaultyReplicator] = []
    from e2e.crr import object_replicator

    with watching(cluster) as w:
        try:
            drivers = {repo: w.source("east", repo, seed=4 + i)
                       for i, repo in enumerate(repos)}
            for i, (repo, region) in enumerate((r, d) for r in repos
                                               for d in ("west", "north")):
                def held(_rel: str, repo: str = repo, region: str = region) -> bool:
                    return hold["on"] and (repo, region) == ("features", "north")

                crr = object_replicator(
                    cluster, cluster.east.namespace(repo),
                    cluster.regions[region].namespace(repo), destination=region, seed=i,
                    drop=0.1, duplicate=0.1, max_delay=0.01, hold=held)
                crr.start(period=0.05)
                replicators.append(crr)
            mirrors = {(repo, region): w.mirror(drivers[repo], "east", repo, region)
                       for repo in repos for region in ("west", "north")}
            groups = {region: w.group(f"pipeline-{region}", "east", region,
                                      [(mirrors[(repo, region)], "main") for repo in repos])
                      for region in ("west", "north")}
            w.wait_in_sync("first promotions")
            for g in groups.values():
                g.armed = True

            def pipeline() -> dict[str, str]:
                heads = {}
                for repo in repos:
                    heads[repo] = drivers[repo].write_commit("main", files=2)
                    w.check()
                return heads

            pipeline()
            w.wait_in_sync("the first pipeline")
            before = {r: w.clients["north"].branch_head(r, "main") for r in repos}
            # features' objects do not reach north: north serves neither new commit
            hold["on"] = True
            new = pipeline()
            w.wait_in_sync("west serves the new cut",
                           [mirrors[(r, "west")] for r in repos])

            def north_waits_for_features() -> bool:
                waiting = w.clients["north"].group_status(groups["north"].group_id)["waiting"]
                return bool(waiting) and mirrors[("features", "north")].mirror_id in \
                    waiting["waiting_for"] and mirrors[("labels", "north")].mirror_id \
                    not in waiting["waiting_for"]

            wait_for(north_waits_for_features, SYNC_TIMEOUT, 0.1,
                     what="north's cut waits for features only", check=w.check)
            w.check_for(1.0)
            after = {r: w.clients["north"].branch_head(r, "main") for r in repos}
            assert after == before, f"north moved to {after} without features' objects"
            hold["on"] = False
            wait_for(lambda: {r: w.clients["north"].branch_head(r, "main")
                              for r in repos} == new, SYNC_TIMEOUT, 0.05,
                     what="north serves both new commits", check=w.check)
            # a kill in the middle of pipelines: I8 holds across it
            w.kill("north", "sidecar")
            pipeline()
            w.restart("north")
            pipeline()
            w.wait_in_sync("after the pipelines")
            for region, g in groups.items():
                status = w.clients[region].group_status(g.group_id)
                served = {h["mirror_id"]: h["commit_id"] for h in status["served_cut"]["heads"]}
                assert g.matching(served), f"{region}'s served cut {served} is no cut"
            return w.finish()
        finally:
            for crr in replicators:
                crr.stop()


SCENARIOS: dict[str, tuple[ClusterSpec, Callable[[Cluster], dict[str, Any]]]] = {
    "one-to-many": (ONE_TO_MANY, one_to_many),
    "bidirectional": (BIDIRECTIONAL, bidirectional),
    "group-two-regions": (GROUP_TWO_REGIONS, group_two_regions),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.topologies",
                                     description="Seed 003's topologies with real processes.")
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                        help=f"which to run: {', '.join(SCENARIOS)} (default: all)")
    parser.add_argument("--data-dir", type=Path, help="keep data and logs here")
    args = parser.parse_args(argv)
    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {unknown[0]!r}: one of {', '.join(SCENARIOS)}")
    failed = 0
    with terminate_as_exit():
        for name in args.scenarios or list(SCENARIOS):
            spec, scenario = SCENARIOS[name]
            started = time.monotonic()
            try:
                with scratch_dir(args.data_dir and args.data_dir / name,
                                 f"lakefs-{name}-") as root, \
                        start_cluster(root, spec) as cluster:
                    figures = scenario(cluster)
                print(f"{name}: ok in {time.monotonic() - started:.0f}s: {figures}",
                      flush=True)
            except AssertionError as e:
                failed += 1
                traceback.print_exc()
                print(f"{name}: FAILED in {time.monotonic() - started:.0f}s: {e}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
