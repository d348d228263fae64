"""Chaos checker: ``python -m e2e.chaos --seed S --ops N``.

Starts a two-region cluster of real processes, creates a repository in ``east`` and
its mirror in ``west``, then runs a random sequence of N steps: source operations
(commits, branch creation and re-creation, deletions, merges, hard resets, tags) and
faults (``kill -9`` of a sidecar or a server of either region followed by a restart
at a random moment, object replication paused, bursts of commits with nobody
looking). The invariants I1-I4 are checked after every step and while processes are
down; at the end every fault is healed and the mirror must catch up.

The plan (the sequence of steps) depends only on the seed: ``--plan`` prints it.
Object contents come from the same seed. What the processes do in between is up
to the operating system, which is the point.

Each region stores its objects where ``--storage`` says: a local directory, S3 (moto),
Azure Blob (Azurite) or Cloud Storage (its emulator); ``--storage s3,azure`` puts the
source region on S3 and the destination on Azure, a mirror across clouds.

The sidecars act as a user with seed 003's narrow replication policy by default
(``--policy broad``, or ``admin``). ``--summary-json PATH`` writes the run's figures
(steps, kills, switchovers, failovers, failbacks, commits verified, violations,
failures, wall time, the combination);
``python -m e2e.chaos_long`` runs many seeds over every combination with it.

``--handover`` adds the moves of the primary between the regions (the repository then
carries the same name in both): planned switchovers, asked in either region while the
workload keeps committing to the primary (what it acknowledges during the freeze must
not be lost), and failovers (the primary region killed, its mirror watched while it
goes blind, or the primary left running and written to after the detach), each
followed a few steps later by the failback, after the old region is restarted. The
checker follows the roles: the workload writes to the primary of the moment, and the
old primary's repository, now the mirror, is checked like the first one (I1-I4); I6
(honest lag) is checked on every status read and I7 (nothing lost) after each
switchover and failback (see :mod:`e2e.invariants`).

``--regions 3`` adds a third region, ``north``: the repository is mirrored to west and
north (one source, two destinations, each checked), and north's sidecar and server are
among the kill victims. ``--groups`` adds a second source repository, ``chaos-labels``,
mirrored wherever the first is, and a mirror group of both ``main`` branches into each
destination region; the plan gets pipeline steps (a commit to ``chaos`` then one to
``chaos-labels``) and requested cuts, and I8 is checked in every destination after
every step and while processes are down: the member heads a region serves at one
instant are one cut's, the cut served never goes back, and every cut holds heads the
source had at one moment. ``--handover`` runs on two regions without groups only.

Exit status: 0 no violation and the mirror caught up; 1 an invariant was violated,
or the mirror did not catch up within ``--settle-timeout``; 2 the run itself failed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from e2e.api import ApiError, RegionClient
from e2e.cluster import (
    ALL_REGIONS,
    DESTINATION,
    POLICIES,
    SOURCE,
    STORAGES,
    Cluster,
    ClusterSpec,
    Storage,
    cut_reader,
    parse_storage,
    scratch_dir,
    start_cluster,
)
from e2e.invariants import (
    BLIND_MARGIN,
    ApiMirrorChecker,
    CheckerStats,
    GroupCutChecker,
    GroupMemberRef,
    HandoverAudit,
    InvariantViolation,
    SourceTimeline,
    record_violation,
)
from e2e.processes import terminate_as_exit
from e2e.workload import SourceDriver

if TYPE_CHECKING:
    from lakefs_testing.replicator import FaultyReplicator
    from mirrors_db.table import MirrorsTable

BRANCHES = ("main", "b1", "b2", "b3")
TAGS = ("t1", "t2")
REPO, MIRROR = "chaos", "chaos-mirror"
#: the second repository of ``--groups`` and its mirrors' name
REPO_B, MIRROR_B = "chaos-labels", "chaos-labels-mirror"
#: step kind -> weight in the plan
WEIGHTS = {
    "commit": 34, "create": 10, "delete": 5, "merge": 10, "reset": 6, "tag": 6,
    "kill": 18, "burst": 6, "pause-crr": 3, "settle": 3,
}
#: the steps ``--handover`` adds (a failover brings its failback later)
HANDOVER_WEIGHTS = {"switchover": 2, "failover": 2}
#: the steps ``--groups`` adds: a commit to each member in turn, a cut asked for
GROUP_WEIGHTS = {"pipeline": 14, "cut": 3}
#: a failback comes this many steps (at least, at most) after its failover
FAILBACK_AFTER = (2, 8)
#: what a switchover or failback may take before it is refused (409)
HANDOVER_TIMEOUT = 90.0
VICTIMS = ("west-sidecar", "west-server", "east-sidecar", "east-server")
#: the victims a third region adds
THIRD_VICTIMS = ("north-sidecar", "north-server")


@dataclass(frozen=True)
class Step:
    """One planned step.

    Attributes:
        kind: one of :data:`WEIGHTS` or :data:`HANDOVER_WEIGHTS`, or ``failback``.
        target: the branch, tag or victim (``west-sidecar``, ...) the step acts on; for a
            switchover the region asked (``source`` or ``destination``), for a failover
            ``kill`` (the primary region dies) or ``split`` (it lives on, and takes a few
            more writes), for a failback the region asked (``new`` or ``old`` primary).
        other: a second branch (source of a new branch, merge destination, tag ref).
        n: files per commit, commits per burst, ``~n`` of a reset, replica pick, the
            commits a failover makes on the old primary.
        delay: seconds of checking after the step (how long a victim stays down).
    """

    kind: str
    target: str = ""
    other: str = ""
    n: int = 0
    delay: float = 0.0

    def __str__(self) -> str:
        what = {
            "commit": f"commit {self.n} file(s) to {self.target}",
            "create": f"(re-)create {self.target} from {self.other} (or main)",
            "delete": f"delete {self.target}",
            "merge": f"merge {self.target} into {self.other}",
            "reset": f"hard-reset {self.target} to {self.target}~{self.n}",
            "tag": f"create or delete tag {self.target} at {self.other}",
            "kill": f"kill -9 {self.target} (replica pick {self.n})",
            "burst": f"burst of {self.n} commits to {self.target}",
            "switchover": f"switchover asked in the {self.target} region, commits to the "
                          "primary meanwhile",
            "failover": (f"failover: {self.n} commit(s), kill -9 the primary region, "
                         "watch the blind mirror, detach it" if self.target == "kill" else
                         f"failover: detach the mirror, {self.n} more commit(s) to the old "
                         "primary"),
            "failback": f"failback asked in the {self.target} primary's region",
            "pipeline": f"pipeline: commit {self.n} file(s) to {REPO}, then to {REPO_B}",
            "cut": "a cut of every group asked for",
        }.get(self.kind, self.kind)
        return f"{what}, then {self.delay}s" if self.delay else what


def plan(seed: int, ops: int, *, handover: bool = False, regions: int = 2,
         groups: bool = False) -> list[Step]:
    """The steps of a run: a pure function of the seed, the number of steps, whether
    switchovers and failovers are in, the number of regions and whether groups are in
    (without them a seed plans what it always did).

    One handover at a time: no switchover or failover while a failover awaits its
    failback, which comes :data:`FAILBACK_AFTER` steps later (the last step at the
    latest); the run restarts the old primary's region before the failback.
    """
    rng = random.Random(seed)
    base = WEIGHTS | (GROUP_WEIGHTS if groups else {})
    victims = VICTIMS + (THIRD_VICTIMS if regions > 2 else ())
    kinds, weights = zip(*base.items(), strict=True)
    all_kinds, all_weights = zip(*(base | HANDOVER_WEIGHTS).items(), strict=True) \
        if handover else (kinds, weights)
    steps = []
    failback_at: int | None = None
    for i in range(ops):
        if failback_at is not None and (i >= failback_at or i == ops - 1):
            steps.append(Step("failback", rng.choice(("new", "old")),
                              delay=round(rng.random() * 1.5, 2)))
            failback_at = None
            continue
        kind = rng.choices(all_kinds, all_weights)[0]
        if kind in HANDOVER_WEIGHTS and (failback_at is not None or i == ops - 1):
            kind = rng.choices(kinds, weights)[0]
        delay = round(rng.random() * 1.5, 2)
        if kind == "commit":
            steps.append(Step(kind, rng.choice(BRANCHES), n=rng.randint(1, 4), delay=delay))
        elif kind in ("create", "merge"):
            a, b = rng.sample(BRANCHES, 2)
            steps.append(Step(kind, a, b, delay=delay))
        elif kind == "delete":
            steps.append(Step(kind, rng.choice(BRANCHES[1:]), delay=delay))
        elif kind == "reset":
            steps.append(Step(kind, rng.choice(BRANCHES), n=rng.randint(1, 3), delay=delay))
        elif kind == "tag":
            steps.append(Step(kind, rng.choice(TAGS), rng.choice(BRANCHES), delay=delay))
        elif kind == "kill":
            steps.append(Step(kind, rng.choice(victims), n=rng.randrange(1 << 16),
                              delay=delay))
        elif kind == "burst":
            steps.append(Step(kind, rng.choice(BRANCHES), n=rng.randint(3, 6)))
        elif kind == "switchover":
            steps.append(Step(kind, rng.choice(("source", "destination")), delay=delay))
        elif kind == "failover":
            steps.append(Step(kind, rng.choice(("kill", "split")), n=rng.randint(1, 3),
                              delay=delay))
            failback_at = i + rng.randint(*FAILBACK_AFTER)
        elif kind == "pipeline":
            steps.append(Step(kind, n=rng.randint(1, 3), delay=delay))
        else:
            steps.append(Step(kind, delay=delay))
    return steps


def plan_digest(steps: Sequence[Step]) -> str:
    return hashlib.sha256("\n".join(map(str, steps)).encode()).hexdigest()[:16]


@dataclass
class OtherMirror:
    """A mirror beside the primary's mirror in ``west`` (``--regions 3``, ``--groups``)."""

    checker: ApiMirrorChecker
    mirror_id: str
    region: str


@dataclass
class Failover:
    """A failover awaiting its failback."""

    #: the old primary's region, and whether its processes were killed
    region: str
    killed: bool
    #: the detached mirror (the failback starts from it)
    mirror_id: str
    #: what the old primary acknowledged and where its refs point
    driver: SourceDriver


class ChaosRun:
    """Executes a plan against a running cluster, checking after every step.

    The primary starts in ``east``, its mirror in ``west``. A switchover swaps the
    roles (the old primary's repository becomes the reverse mirror, with a new mirror
    id); a failover detaches the mirror, which becomes the primary, until the failback
    makes the old primary's repository its mirror. The workload always writes to the
    primary of the moment.

    With three regions the repository has a second mirror, in ``north``; with groups a
    second repository is mirrored wherever the first is, and a group of both ``main``
    branches goes into each destination region. Those mirrors never move (handovers run
    on two regions without groups).

    Args:
        handover: the repositories carry the same name in both regions (so roles can
            swap under the narrow replication policy), and with ``native`` replication
            objects are replicated both ways.
        groups: a second repository and a group per destination region.
    """

    def __init__(self, cluster: Cluster, seed: int, *, verbose: bool = False,
                 handover: bool = False, groups: bool = False) -> None:
        self.cluster = cluster
        self.rng = random.Random(seed)
        self.verbose = verbose
        self.clients = {name: region.client() for name, region in cluster.regions.items()}
        self.east, self.west = self.clients[SOURCE], self.clients[DESTINATION]
        self.mirror_name = REPO if handover else MIRROR
        self.primary = SOURCE
        self.violations: list[InvariantViolation] = []
        self.stats = CheckerStats()
        self.checker = self._checker()
        self.src = SourceDriver(self.east, REPO, self.checker, random.Random(seed ^ 0x5EED))
        #: the mirrors beside the primary's, the second repository's, the groups
        self.others: list[OtherMirror] = []
        self.src_b: SourceDriver | None = None
        self.groups: list[GroupCutChecker] = []
        self.timeline = SourceTimeline()
        self.table: MirrorsTable | None = None
        if groups:
            self.src.observers.append(self.timeline.follow(REPO))
            self.src_b = SourceDriver(self.east, REPO_B, None, random.Random(seed ^ 0xB0B),
                                      observers=[self.timeline.follow(REPO_B)])
        self.audit = HandoverAudit(self.violations)
        self.done: Counter[str] = Counter()
        self.replicators: list[FaultyReplicator] = []
        self.handover = handover
        self.mirror_id = ""
        self.failover: Failover | None = None
        #: heads of old primaries that failbacks kept on failover branches
        self.kept_heads = 0
        #: region -> when its server was killed, while it is down
        self.down_since: dict[str, float] = {}
        #: settle steps after which the mirror had not caught up in time, handovers that
        #: could not be done
        self.stalls: list[str] = []

    def close(self) -> None:
        for crr in self.replicators:
            crr.stop()
        for client in self.clients.values():
            client.close()
        if self.table is not None:
            self.table.close()

    def log(self, message: str) -> None:
        if self.verbose:
            print(f"  {message}", flush=True)

    @property
    def secondary(self) -> str:
        """The region of the mirror (or, during a failover, of the old primary)."""
        return DESTINATION if self.primary == SOURCE else SOURCE

    def repo_in(self, region: str) -> str:
        """The repository's name in ``region``."""
        return REPO if region == SOURCE else self.mirror_name

    def place(self, region: str) -> tuple[RegionClient, str]:
        return self.clients[region], self.repo_in(region)

    def _checker(self) -> ApiMirrorChecker:
        """A checker of the mirror of the primary (in the other region)."""
        return ApiMirrorChecker(*self.place(self.primary), *self.place(self.secondary),
                                collect=True, violations=self.violations, stats=self.stats)

    # -------------------------------------------------------------- set up
    def _mirror(self, driver: SourceDriver, name: str, region: str) -> OtherMirror:
        """Mirror ``driver``'s repository into ``region`` (not the primary's mirror)."""
        checker, mirror_id = driver.mirror_to(
            self.clients[region], name, region, self.cluster.regions[region].namespace(name),
            collect=True, violations=self.violations, stats=self.stats)
        other = OtherMirror(checker, mirror_id, region)
        self.others.append(other)
        return other

    def set_up(self) -> None:
        ns = self.cluster.east.namespace(REPO)
        self.src.create_repository(ns)
        self.src.write_commit("main", files=4)
        if self.src_b is not None:
            self.src_b.create_repository(self.cluster.east.namespace(REPO_B))
            self.src_b.write_commit("main", files=3)
        mirror_ns = self.cluster.west.namespace(self.mirror_name)
        self.mirror_id = str(self.east.create_mirror(REPO, self.mirror_name, "west",
                                                     mirror_ns)["id"])
        destinations = self.cluster.spec.region_names[1:]
        mirrors = {DESTINATION: self.mirror_id} | {
            region: self._mirror(self.src, self.mirror_name, region).mirror_id
            for region in destinations[1:]}
        if self.src_b is not None:
            labels = {region: self._mirror(self.src_b, MIRROR_B, region).mirror_id
                      for region in destinations}
            self.table = self.cluster.open_mirrors_table()
            for region in destinations:
                self._group(region, [mirrors[region], labels[region]])
        if self.cluster.spec.replication == "native":
            from e2e.crr import object_replicator

            ways = [(ns, mirror_ns, SOURCE, DESTINATION)]
            ways += [(self.cluster.east.namespace(o.checker.source_repo),
                      self.cluster.regions[o.region].namespace(o.checker.mirror_repo),
                      SOURCE, o.region) for o in self.others]
            if self.handover:  # bucket replication both ways: either may be the primary
                ways.append((mirror_ns, ns, DESTINATION, SOURCE))
            for src_ns, dst_ns, source, destination in ways:
                crr = object_replicator(self.cluster, src_ns, dst_ns, source=source,
                                        destination=destination,
                                        seed=self.rng.randrange(1 << 30), drop=0.25,
                                        duplicate=0.2, max_delay=0.01)
                crr.start(period=0.1)
                self.replicators.append(crr)

    def _group(self, region: str, mirror_ids: list[str]) -> None:
        """A group of both repositories' ``main`` into ``region``, I8 checked once armed."""
        assert self.table is not None
        created = self.east.create_group(f"pipeline-{region}", region,
                                         [(m, "main") for m in mirror_ids])
        group_id = str(created["id"])
        members = [GroupMemberRef(mirror_ids[0], REPO, self.mirror_name, "main"),
                   GroupMemberRef(mirror_ids[1], REPO_B, MIRROR_B, "main")]
        self.groups.append(GroupCutChecker(
            self.clients[region], region, group_id, members, cut_reader(self.table, group_id),
            self.timeline, violations=self.violations, stats=self.stats))

    def wait_all_in_sync(self, timeout: float, what: str) -> None:
        """Every mirror caught up with its source (AssertionError on timeout); then the
        groups are judged (I8): from now on every cut is the group's to serve."""
        from lakefs_testing.waiting import wait_for

        checkers = [self.checker, *(o.checker for o in self.others)]
        wait_for(lambda: all(c.in_sync() for c in checkers), timeout, 0.1, what=what,
                 check=self.check_all)
        self.check_all()
        for group in self.groups:
            group.armed = True

    # ----------------------------------------------------------- the steps
    def check_all(self) -> None:
        """One round of every checker: the mirrors (I1-I4), the groups (I8)."""
        self.checker.check()
        for other in self.others:
            other.checker.check()
        for group in self.groups:
            group.check()

    def check_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        self.check_all()
        while time.monotonic() < deadline:
            time.sleep(0.05)
            self.check_all()

    def check_status(self) -> dict[str, Any] | None:
        """I6 on the mirrors' statuses; the primary's mirror's status, if it has one."""
        for other in self.others:
            other.checker.check_status(other.mirror_id,
                                       source_down_since=self.down_since.get(SOURCE))
        if self.failover is not None:
            return None
        return self.checker.check_status(self.mirror_id,
                                         source_down_since=self.down_since.get(self.primary))

    def probe_read_only(self) -> None:
        """I4 on every mirror."""
        self.checker.probe_read_only()
        for other in self.others:
            other.checker.probe_read_only()

    def run(self, steps: Sequence[Step], first: int = 1, total: int | None = None) -> None:
        """Execute ``steps`` (numbered from ``first`` of ``total`` in the output)."""
        total = total or len(steps)
        for i, step in enumerate(steps, first):
            outcome = self.execute(step)
            self.done[f"{step.kind}{'' if outcome else ' (skipped)'}"] += 1
            self.log(f"[{i}/{total}] {step}{'' if outcome else ' -> skipped'}")
            self.check_for(step.delay)
            self.check_status()
            if i % 10 == 0:
                self.probe_read_only()
            if i % 10 == 0 and not self.verbose:
                print(f"  {i}/{total} steps, {len(self.violations)} "
                      "violations so far", flush=True)

    def execute(self, step: Step) -> bool:
        """Run one step; False when it did not apply to the current state (a no-op)."""
        if step.kind == "switchover":
            return self.switchover(step)
        if step.kind == "failover":
            return self.fail_over(step)
        if step.kind == "failback":
            return self.fail_back(step)
        if step.kind == "pipeline":
            assert self.src_b is not None
            self.src.write_commit("main", files=step.n)
            self.check_all()
            self.src_b.write_commit("main", files=step.n)
            return True
        if step.kind == "cut":
            for group in self.groups:
                self.east.take_cut(group.group_id)
            return bool(self.groups)
        heads = self.src.branches()
        if step.kind in ("commit", "burst"):
            if step.target not in heads:
                self.src.create_branch(step.target, "main")
            rounds = step.n if step.kind == "burst" else 1
            for _ in range(rounds):
                self.src.write_commit(step.target, files=step.n if step.kind == "commit" else 1)
            return True
        if step.kind == "create":
            source = step.other if step.other in heads else "main"
            if step.target in heads:
                if step.target == "main":
                    return False
                self.src.delete_branch(step.target)  # and re-create it elsewhere
            self.src.create_branch(step.target, source)
            return True
        if step.kind == "delete":
            if step.target not in heads:
                return False
            self.src.delete_branch(step.target)
            return True
        if step.kind == "merge":
            if step.target not in heads or step.other not in heads:
                return False
            return self.src.merge(step.target, step.other) is not None
        if step.kind == "reset":
            if step.target not in heads:
                return False
            try:
                self.src.reset(step.target, f"{step.target}~{step.n}")
            except ApiError as e:
                if e.status == 404 and self.src.heads.get(step.target) != heads[step.target]:
                    return self.unserved_reset(step, heads[step.target], e)
                if e.status in (400, 404):  # not that many ancestors
                    return False
                raise
            return True
        if step.kind == "tag":
            tags = self.src.client.tags(self.src.repo)
            if step.target in tags:
                self.src.delete_tag(step.target)
            elif step.other in heads:
                self.src.tag(step.target, step.other)
            else:
                return False
            return True
        if step.kind == "kill":
            return self.kill(step)
        if step.kind == "pause-crr":
            if not self.replicators:
                return False
            for crr in self.replicators:
                crr.drop = 1.0
            self.check_for(1.0 + step.delay)
            for crr in self.replicators:
                crr.drop = 0.25
            return True
        if step.kind == "settle":
            if self.failover is not None:
                return False  # no mirror to wait for
            try:
                self.wait_all_in_sync(90, "the mirrors to catch up (settle step)")
            except AssertionError as e:
                self.stalls.append(str(e))
                print(f"  STALL: {e}", flush=True)
            return True
        raise ValueError(f"unknown step {step.kind!r}")

    def unserved_reset(self, step: Step, before: str, error: ApiError) -> bool:
        """The reset moved the branch to a commit the primary does not serve (a commit it
        never proved present while it was a mirror): a failure of the product, reported;
        the branch goes back to its head before, so the run goes on."""
        self.stalls.append(f"hard reset of {step.target} to {step.target}~{step.n} in the "
                           f"primary ({self.primary}) succeeded, but the primary does not "
                           f"serve the new head: {error}")
        print(f"  FAILURE {self.stalls[-1]}", flush=True)
        self.src.reset(step.target, before)
        return True

    def kill(self, step: Step) -> bool:
        region_name, _, what = step.target.partition("-")
        if self.failover is not None and self.failover.killed \
                and self.failover.region == region_name:
            return False  # the whole region is down until the failback
        region = self.cluster.regions[region_name]
        victims = region.sidecars if what == "sidecar" else [region.server]
        victim = victims[step.n % len(victims)]
        victim.kill()
        if what == "server":
            self.down_since[region_name] = time.time()
        self.check_for(step.delay)
        self.check_status()
        victim.start()
        self.down_since.pop(region_name, None)
        return True

    # ---------------------------------------------------------- handovers
    def _become_primary(self, region: str, mirror_id: str) -> None:
        """``region`` is the primary from now on: the workload writes there, its mirror
        (``mirror_id``; "" while there is none) is checked in the other region."""
        previous = self.src
        self.primary, self.mirror_id = region, mirror_id
        self.checker = self._checker()
        self.checker.detached = not mirror_id
        self.src = SourceDriver(*self.place(region), self.checker, previous.rng,
                                previous.commits)
        client, repo = self.place(region)
        self.src.adopt(client.branches(repo), client.tags(repo))

    def _legacy(self, driver: SourceDriver) -> None:
        """The old primary's repository is a mirror now; its own refs stay until
        promotions replace them."""
        self.checker.legacy_heads = dict(driver.heads)
        self.checker.legacy_tags = dict(driver.tags)

    def switchover(self, step: Step) -> bool:
        """Ask for a switchover while committing to the primary; I7: every commit it
        acknowledged is in the new primary, whose refs are exactly the old one's."""
        if self.failover is not None:
            return False
        old, new = self.primary, self.secondary
        asked = old if step.target == "source" else new
        answer: dict[str, Any] = {}

        def ask() -> None:  # HTTP only: processes are started from the run's own thread
            try:
                with self.cluster.regions[asked].client(timeout=HANDOVER_TIMEOUT) as c:
                    answer["response"] = c.switchover(self.repo_in(asked), self.mirror_id,
                                                      HANDOVER_TIMEOUT)
            except Exception as e:  # noqa: BLE001 - raised again in the run's thread
                answer["error"] = e

        asking = threading.Thread(target=ask, name="switchover", daemon=True)
        asking.start()
        refused = 0
        while asking.is_alive():
            try:  # what the frozen primary acknowledges must not be lost
                self.src.write_commit("main", files=1)
            except ApiError as e:
                if e.status != 403:
                    raise
                refused += 1
                asking.join(0.2)
        asking.join()
        if "error" in answer:
            raise answer["error"]
        response = answer["response"]
        self.log(f"switchover {old} -> {new}: {response.status_code}, {refused} write(s) "
                 "refused during the freeze")
        if response.status_code == 409:
            try:  # nothing changed: the primary takes writes again
                self.src.write_commit("main", files=1)
            except ApiError as e:
                self.stalls.append(f"switchover refused, but the primary stays read-only: "
                                   f"{e}")
            return False
        old_driver = self.src
        what = f"switchover {old} -> {new}"
        self.audit.check_same_refs(what, old_driver.heads, old_driver.tags, self.place(new))
        required = self.audit.required(old_driver.acknowledged,
                                       [*old_driver.heads.values(), *old_driver.tags.values()],
                                       [self.place(old), self.place(new)])
        self.audit.check(what, required, self.place(new))
        self._become_primary(new, str(response.json()["mirror"]["id"]))
        self.src.acknowledged.update(required)  # the new primary's to keep from now on
        self._legacy(old_driver)
        self.checker.check()
        self.checker.probe_read_only()
        return True

    def fail_over(self, step: Step) -> bool:
        """The primary is lost (killed) or cut off (split): detach its mirror, which
        becomes the primary; with ``kill``, first watch the mirror go blind (I6)."""
        if self.failover is not None:
            return False
        old, new = self.primary, self.secondary
        old_driver = self.src
        killed = step.target == "kill"
        if killed:
            for _ in range(step.n):  # likely not mirrored yet when the region dies
                old_driver.write_commit("main", files=1)
            self.cluster.regions[old].kill()
            self.down_since[old] = time.time()
            self.watch_blind()
        client, repo = self.place(new)
        detached = client.detach_mirror(repo, self.mirror_id)
        if detached["state"] != "detached":
            raise AssertionError(f"detach answered {detached}")
        self.failover = Failover(old, killed, self.mirror_id, old_driver)
        old_driver.checker = None  # nobody mirrors the old primary any more
        self._become_primary(new, "")
        if not killed:  # clients that still reach the old primary keep writing there
            for _ in range(step.n):
                old_driver.write_commit("main", files=1)
        return True

    def watch_blind(self) -> None:
        """Read the mirror's status until its source region has been down for longer
        than the status's ``stale_after_seconds`` (and then once more): I6 each time."""
        down_since = self.down_since[self.primary]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status = self.check_status()
            stale_after = float(status["stale_after_seconds"]) if status else 0.0
            if status and time.time() - down_since > stale_after + BLIND_MARGIN + 0.5:
                return
            self.check_for(0.5)
        raise AssertionError("the mirror's status could not be read while the source "
                             "region was down")

    def fail_back(self, step: Step) -> bool:
        """Restart the old primary's region, ask for the failback; I7: whatever the old
        primary acknowledged is reachable in the primary, the kept heads where the
        answer says; then the old primary's repository is the mirror."""
        failover = self.failover
        if failover is None:
            return False
        old, new = failover.region, self.primary
        region = self.cluster.regions[old]
        region.start()
        self.down_since.pop(old, None)
        old_driver = failover.driver
        required = self.audit.required(old_driver.acknowledged,
                                       [*old_driver.heads.values(), *old_driver.tags.values()],
                                       [self.place(old), self.place(new)])
        # in the new primary already (mirrored before the failover): its own writes may
        # have moved them off every ref since, which is no loss
        there = self.audit.present(self.place(new), required)
        asked = new if step.target == "new" else old
        response = None
        for _ in range(3):
            response = self.clients[asked].failback(self.repo_in(asked), failover.mirror_id,
                                                    HANDOVER_TIMEOUT)
            if response.status_code == 200:
                break
            self.log(f"failback refused: {response.text[:300]}")
        assert response is not None
        if response.status_code != 200:
            self.stalls.append(f"failback refused: {response.text[:300]}")
            return False
        answer = response.json()
        what = f"failback of {old} to {new}"
        branches = self.src.client.branches(self.src.repo)
        for kept in answer["kept"]:
            if branches.get(kept["branch"]) != kept["commit_id"]:
                record_violation(self.violations, "I7", f"{what}: kept {kept['kind']} "
                                 f"{kept['ref']} on {kept['branch']}, which is at "
                                 f"{branches.get(kept['branch'])}, not {kept['commit_id']}")
        self.audit.check(what, required, self.place(new), excused=there)
        # the failover branches are the primary's refs, and what they keep its to keep
        self.src.adopt(branches, self.src.client.tags(self.src.repo))
        self.src.acknowledged.update(required)
        self.failover = None
        self.mirror_id = str(answer["mirror"]["id"])
        self.checker.detached = False
        self._legacy(old_driver)
        self.kept_heads += len(answer["kept"])
        self.checker.check()
        self.checker.probe_read_only()
        return True

    # ------------------------------------------------------------- the end
    def heal_and_settle(self, timeout: float) -> bool:
        """Every process up, replication undisturbed; True once the mirror caught up."""
        for p in self.cluster.processes:
            if not p.alive:
                p.start()
        self.down_since.clear()
        for crr in self.replicators:
            crr.drop = 0.0
        if self.failover is not None and not self.fail_back(Step("failback", "new")):
            print("NOT CONVERGED: the failback was refused", flush=True)
            return False
        try:
            self.wait_all_in_sync(timeout, "the mirrors to catch up after the run")
        except AssertionError as e:
            print(f"NOT CONVERGED: {e}", flush=True)
            return False
        self.check_status()
        self.probe_read_only()
        for group in self.groups:  # in sync: the cut of the source's heads is served
            if group.served_cut() is None:
                print(f"NOT CONVERGED: group {group.group_id} in {group.region} serves the "
                      "source's heads, but no cut of them", flush=True)
                return False
        return True

    def corrupt_one_mirror_object(self) -> str:
        """Canary: change one mirrored object's bytes behind the system's back."""
        client, repo = self.place(self.secondary)
        head = client.branches(repo)["main"]
        stat = next(s for s in client.list_objects(repo, head) if s["size_bytes"])
        root = self.cluster.regions[self.secondary].blockstore_root
        path = root / stat["physical_address"].removeprefix("local://")
        path.write_bytes(b"!" + path.read_bytes()[1:])
        self.checker.verify_commit(head, "main (canary)", force=True)
        return str(stat["path"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.chaos",
        description="Random source operations and faults against two or three regions "
                    "of real processes; reports invariant violations (exit status 1).")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ops", type=int, default=40, help="number of steps")
    parser.add_argument("--mirrors-db", choices=("sqlite", "postgres", "dynamodb"),
                        default="sqlite")
    parser.add_argument("--refstore", choices=("local", "postgres", "dynamodb"),
                        help="each server's metadata database (lakeFS's database.type; "
                             "dynamodb: a table on moto, the auth store in SQLite beside "
                             "it); default postgres with --mirrors-db postgres, else local")
    parser.add_argument(
        "--storage", type=_storage, default=("local", None), metavar="STORE[,STORE]",
        help=f"each region's blockstore, one of {', '.join(STORAGES)} (S3 on moto, Azure "
             "on Azurite, Cloud Storage on gcp-storage-emulator): one for both regions, or "
             "the source region's and the destination's, e.g. s3,azure (a mirror across "
             "clouds, with the builtin copier; native replication is S3 only)")
    parser.add_argument("--replication", choices=("builtin", "builtin-direct", "native"),
                        default="builtin")
    parser.add_argument("--policy", choices=POLICIES, default="narrow",
                        help="the sidecars' replication user: seed 003's narrow or broad "
                             "policy, or the admin")
    parser.add_argument("--sidecars", type=int, default=1, help="replicas per region")
    parser.add_argument("--settle-timeout", type=float, default=120.0)
    parser.add_argument("--data-dir", type=Path, help="keep data and logs here")
    parser.add_argument("--summary-json", type=Path,
                        help="write the run's figures here (JSON), whatever the outcome")
    parser.add_argument("--plan", action="store_true", help="print the plan and exit")
    parser.add_argument("--handover", action="store_true",
                        help="the plan has switchovers, and failovers each followed by "
                             "its failback (the repository then has the same name in "
                             "both regions)")
    parser.add_argument("--regions", type=int, choices=(2, 3), default=2,
                        help="3: the repository is mirrored to west and north, and north's "
                             "processes are killed too")
    parser.add_argument("--groups", action="store_true",
                        help="a second repository mirrored beside the first, a group of "
                             "both main branches into each destination region, pipeline "
                             "and cut steps, I8 checked")
    parser.add_argument("--canary", action="store_true",
                        help="self-test: corrupt one mirror object mid-run (local storage); "
                             "the run must then report an I2 violation and fail")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.handover and (args.regions > 2 or args.groups):
        parser.error("--handover runs on two regions without groups")
    steps = plan(args.seed, args.ops, handover=args.handover, regions=args.regions,
                 groups=args.groups)
    print(f"chaos: seed {args.seed}, {args.ops} steps"
          f"{topology_label(args.regions, args.groups)}"
          f"{' with handovers' if args.handover else ''}, plan {plan_digest(steps)}",
          flush=True)
    if args.plan:
        for i, step in enumerate(steps, 1):
            print(f"{i:4d} {step}")
        return 0
    east_storage, west_storage = args.storage
    if args.canary and (west_storage or east_storage) != "local":
        parser.error("--canary needs --storage local")
    try:
        spec = ClusterSpec(mirrors_db=args.mirrors_db, storage=east_storage,
                           west_storage=west_storage,
                           refstore=args.refstore or (
                               "postgres" if args.mirrors_db == "postgres" else "local"),
                           replication=args.replication, sidecars_per_region=args.sidecars,
                           log_level="INFO", policy=args.policy, source_repository=REPO,
                           mirror_repository=REPO if args.handover else MIRROR,
                           regions=args.regions, also_mirrored=tuple(
                               (REPO_B, MIRROR_B, region)
                               for region in ALL_REGIONS[1:args.regions] if args.groups))
    except ValueError as e:
        parser.error(str(e))
    print(f"  cluster: {spec.describe()}", flush=True)
    with terminate_as_exit():
        outcome = execute(args, spec, steps)
    if args.summary_json is not None:
        args.summary_json.write_text(json.dumps(outcome.summary(), indent=2) + "\n")
    return outcome.exit_status


def topology_label(regions: int, groups: bool) -> str:
    """`` on 3 regions with groups`` (empty for two regions without groups)."""
    return ((f" on {regions} regions" if regions > 2 else "")
            + (" with groups" if groups else ""))


def _storage(value: str) -> tuple[Storage, Storage | None]:
    try:
        return parse_storage(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


@dataclass
class Outcome:
    """What a run did and found (``--summary-json`` writes :meth:`summary`)."""

    seed: int
    ops: int
    plan: str
    spec: ClusterSpec
    handover: bool = False
    groups: bool = False
    run: ChaosRun | None = None
    converged: bool = False
    #: the harness's own failure (exit status 2), not an invariant violation
    error: str = ""
    wall_seconds: float = 0.0

    @property
    def violations(self) -> list[str]:
        return [str(v) for v in self.run.violations] if self.run else []

    @property
    def failures(self) -> list[str]:
        """Why the run failed, other than a violation: stalls, no convergence, errors."""
        out = list(self.run.stalls) if self.run else []
        if self.error:
            out.append(f"harness error: {self.error}")
        elif not self.converged:
            out.append("the mirror did not converge after the run")
        return out

    @property
    def exit_status(self) -> int:
        if self.error:
            return 2
        return 1 if self.violations or self.failures else 0

    def summary(self) -> dict[str, Any]:
        done = self.run.done if self.run else Counter[str]()
        stats = self.run.stats if self.run else None
        return {
            "seed": self.seed, "ops": self.ops, "plan": self.plan, "handover": self.handover,
            "regions": self.spec.regions, "groups": self.groups,
            "combination": {"mirrors_db": self.spec.mirrors_db, "storage": self.spec.storage_label,
                            "replication": self.spec.replication, "policy": self.spec.policy,
                            "sidecars_per_region": self.spec.sidecars_per_region},
            "steps": sum(done.values()),
            "step_kinds": dict(sorted(done.items())),
            "kills": done["kill"],
            "switchovers": done["switchover"],
            "failovers": done["failover"],
            "failbacks": done["failback"],
            "kept_heads": self.run.kept_heads if self.run else 0,
            "handover_commits_checked": self.run.audit.commits_checked if self.run else 0,
            "status_reads": stats.status_reads if stats else 0,
            "blind_status_reads": stats.blind_reads if stats else 0,
            "commits_verified": stats.commits_verified if stats else 0,
            "objects_compared": stats.objects_compared if stats else 0,
            "pipelines": done["pipeline"],
            "group_reads": stats.group_reads if stats else 0,
            "cuts_checked": stats.cuts_checked if stats else 0,
            "violations": self.violations,
            "failures": self.failures,
            "converged": self.converged,
            "exit_status": self.exit_status,
            "wall_seconds": round(self.wall_seconds, 1),
        }


def execute(args: argparse.Namespace, spec: ClusterSpec, steps: Sequence[Step]) -> Outcome:
    """Run the plan on a fresh cluster, print the report, return the outcome."""
    outcome = Outcome(args.seed, args.ops, plan_digest(steps), spec, args.handover,
                      args.groups)
    started = time.monotonic()
    try:
        with scratch_dir(args.data_dir, "lakefs-chaos-") as root, \
                start_cluster(root, spec) as cluster:
            run = outcome.run = ChaosRun(cluster, args.seed, verbose=args.verbose,
                                         handover=args.handover, groups=args.groups)
            try:
                run.set_up()
                run.wait_all_in_sync(90, "the first promotions")
                half = len(steps) // 2
                run.run(steps[:half], 1, len(steps))
                if args.canary:
                    print(f"  canary: corrupted {run.corrupt_one_mirror_object()} on the "
                          "mirror", flush=True)
                run.run(steps[half:], half + 1, len(steps))
                outcome.converged = run.heal_and_settle(args.settle_timeout)
            finally:
                run.close()
    except Exception as e:  # noqa: BLE001 - report any harness failure as exit status 2
        traceback.print_exc()
        outcome.error = f"{type(e).__name__}: {e}".splitlines()[0][:500]
        print(f"chaos: seed {args.seed}: the run failed (not an invariant violation)")
    outcome.wall_seconds = time.monotonic() - started
    if outcome.error:
        return outcome
    assert outcome.run is not None
    run = outcome.run
    figures = outcome.summary()
    print(f"  steps: {', '.join(f'{k} {v}' for k, v in sorted(run.done.items()))}")
    print(f"  checker: {run.checker.summary()}, {figures['status_reads']} statuses read "
          f"({figures['blind_status_reads']} blind)")
    print(f"  handovers: {figures['switchovers']} switchovers, {figures['failovers']} "
          f"failovers, {figures['failbacks']} failbacks ({figures['kept_heads']} heads kept), "
          f"{figures['handover_commits_checked']} acknowledged commits checked after them")
    if args.groups:
        print(f"  groups: {len(run.groups)} groups, {figures['pipelines']} pipelines, "
              f"{figures['group_reads']} reads of the members at one instant (I8), "
              f"{run.stats.group_reads_moved} moved under the read, "
              f"{figures['cuts_checked']} cuts checked against the source")
    for v in run.violations:
        print(f"  VIOLATION {v}")
    for f in run.stalls:
        print(f"  FAILURE {f}")
    converged = outcome.converged and not run.stalls
    verdict = "ok" if outcome.exit_status == 0 else "FAILED"
    handovers = (f" ({figures['switchovers']} switchovers, {figures['failovers']} failovers, "
                 f"{figures['failbacks']} failbacks)" if args.handover else "")
    print(f"chaos: seed {args.seed}, {args.ops} steps"
          f"{topology_label(args.regions, args.groups)}{handovers}: "
          f"{len(run.violations)} violations, "
          f"{'converged' if converged else 'did not converge'}, "
          f"{outcome.wall_seconds:.0f}s: {verdict}", flush=True)
    return outcome


if __name__ == "__main__":
    sys.exit(main())
