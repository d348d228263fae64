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
(steps, kills, commits verified, violations, failures, wall time, the combination);
``python -m e2e.chaos_long`` runs many seeds over every combination with it.

Exit status: 0 no violation and the mirror caught up; 1 an invariant was violated,
or the mirror did not catch up within ``--settle-timeout``; 2 the run itself failed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from e2e.api import ApiError, RegionClient
from e2e.cluster import (
    POLICIES,
    STORAGES,
    Cluster,
    ClusterSpec,
    Storage,
    parse_storage,
    scratch_dir,
    start_cluster,
)
from e2e.invariants import ApiMirrorChecker
from e2e.processes import terminate_as_exit
from e2e.workload import SourceDriver

if TYPE_CHECKING:
    from lakefs_testing.replicator import FaultyReplicator

BRANCHES = ("main", "b1", "b2", "b3")
TAGS = ("t1", "t2")
REPO, MIRROR = "chaos", "chaos-mirror"
#: step kind -> weight in the plan
WEIGHTS = {
    "commit": 34, "create": 10, "delete": 5, "merge": 10, "reset": 6, "tag": 6,
    "kill": 18, "burst": 6, "pause-crr": 3, "settle": 3,
}
VICTIMS = ("west-sidecar", "west-server", "east-sidecar", "east-server")


@dataclass(frozen=True)
class Step:
    """One planned step.

    Attributes:
        kind: one of :data:`WEIGHTS`.
        target: the branch, tag or victim (``west-sidecar``, ...) the step acts on.
        other: a second branch (source of a new branch, merge destination, tag ref).
        n: files per commit, commits per burst, ``~n`` of a reset, replica pick.
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
        }.get(self.kind, self.kind)
        return f"{what}, then {self.delay}s" if self.delay else what


def plan(seed: int, ops: int) -> list[Step]:
    """The steps of a run: a pure function of the seed and the number of steps."""
    rng = random.Random(seed)
    kinds, weights = zip(*WEIGHTS.items(), strict=True)
    steps = []
    for _ in range(ops):
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
            steps.append(Step(kind, rng.choice(VICTIMS), n=rng.randrange(1 << 16),
                              delay=delay))
        elif kind == "burst":
            steps.append(Step(kind, rng.choice(BRANCHES), n=rng.randint(3, 6)))
        else:
            steps.append(Step(kind, delay=delay))
    return steps


def plan_digest(steps: Sequence[Step]) -> str:
    return hashlib.sha256("\n".join(map(str, steps)).encode()).hexdigest()[:16]


class ChaosRun:
    """Executes a plan against a running cluster, checking after every step."""

    def __init__(self, cluster: Cluster, seed: int, *, verbose: bool = False) -> None:
        self.cluster = cluster
        self.rng = random.Random(seed)
        self.verbose = verbose
        self.east: RegionClient = cluster.east.client()
        self.west: RegionClient = cluster.west.client()
        self.checker = ApiMirrorChecker(self.east, REPO, self.west, MIRROR, collect=True)
        self.src = SourceDriver(self.east, REPO, self.checker, random.Random(seed ^ 0x5EED))
        self.done: Counter[str] = Counter()
        self.crr: FaultyReplicator | None = None
        self.mirror_id = ""
        #: settle steps after which the mirror had not caught up in time
        self.stalls: list[str] = []

    def close(self) -> None:
        if self.crr is not None:
            self.crr.stop()
        self.east.close()
        self.west.close()

    def log(self, message: str) -> None:
        if self.verbose:
            print(f"  {message}", flush=True)

    # -------------------------------------------------------------- set up
    def set_up(self) -> None:
        ns = self.cluster.east.namespace(REPO)
        self.src.create_repository(ns)
        self.src.write_commit("main", files=4)
        mirror_ns = self.cluster.west.namespace(MIRROR)
        self.mirror_id = str(self.east.create_mirror(REPO, MIRROR, "west", mirror_ns)["id"])
        if self.cluster.spec.replication == "native":
            from e2e.crr import object_replicator

            self.crr = object_replicator(self.cluster, ns, mirror_ns,
                                         seed=self.rng.randrange(1 << 30), drop=0.25,
                                         duplicate=0.2, max_delay=0.01)
            self.crr.start(period=0.1)

    # ----------------------------------------------------------- the steps
    def check_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        self.checker.check()
        while time.monotonic() < deadline:
            time.sleep(0.05)
            self.checker.check()

    def run(self, steps: Sequence[Step], first: int = 1, total: int | None = None) -> None:
        """Execute ``steps`` (numbered from ``first`` of ``total`` in the output)."""
        total = total or len(steps)
        for i, step in enumerate(steps, first):
            outcome = self.execute(step)
            self.done[f"{step.kind}{'' if outcome else ' (skipped)'}"] += 1
            self.log(f"[{i}/{total}] {step}{'' if outcome else ' -> skipped'}")
            self.check_for(step.delay)
            if i % 10 == 0:
                self.checker.probe_read_only()
            if i % 10 == 0 and not self.verbose:
                print(f"  {i}/{total} steps, {len(self.checker.violations)} "
                      "violations so far", flush=True)

    def execute(self, step: Step) -> bool:
        """Run one step; False when it did not apply to the current state (a no-op)."""
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
                if e.status in (400, 404):  # not that many ancestors
                    return False
                raise
            return True
        if step.kind == "tag":
            tags = self.east.tags(REPO)
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
            if self.crr is None:
                return False
            self.crr.drop = 1.0
            self.check_for(1.0 + step.delay)
            self.crr.drop = 0.25
            return True
        if step.kind == "settle":
            try:
                self.checker.wait_in_sync(90, "the mirror to catch up (settle step)")
            except AssertionError as e:
                self.stalls.append(str(e))
                print(f"  STALL: {e}", flush=True)
            return True
        raise ValueError(f"unknown step {step.kind!r}")

    def kill(self, step: Step) -> bool:
        region_name, _, what = step.target.partition("-")
        region = self.cluster.regions[region_name]
        victims = region.sidecars if what == "sidecar" else [region.server]
        victim = victims[step.n % len(victims)]
        victim.kill()
        self.check_for(step.delay)
        victim.start()
        return True

    # ------------------------------------------------------------- the end
    def heal_and_settle(self, timeout: float) -> bool:
        """Every process up, replication undisturbed; True once the mirror caught up."""
        for p in self.cluster.processes:
            if not p.alive:
                p.start()
        if self.crr is not None:
            self.crr.drop = 0.0
        try:
            self.checker.wait_in_sync(timeout, "the mirror to catch up after the run")
        except AssertionError as e:
            print(f"NOT CONVERGED: {e}", flush=True)
            return False
        self.checker.probe_read_only()
        return True

    def corrupt_one_mirror_object(self) -> str:
        """Canary: change one mirrored object's bytes behind the system's back."""
        head = self.west.branches(MIRROR)["main"]
        stat = next(s for s in self.west.list_objects(MIRROR, head) if s["size_bytes"])
        path = self.cluster.west.blockstore_root / stat["physical_address"].removeprefix(
            "local://")
        path.write_bytes(b"!" + path.read_bytes()[1:])
        self.checker.verify_commit(head, "main (canary)", force=True)
        return str(stat["path"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.chaos",
        description="Random source operations and faults against two regions of real "
                    "processes; reports invariant violations (exit status 1).")
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
    parser.add_argument("--canary", action="store_true",
                        help="self-test: corrupt one mirror object mid-run (local storage); "
                             "the run must then report an I2 violation and fail")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    steps = plan(args.seed, args.ops)
    print(f"chaos: seed {args.seed}, {args.ops} steps, plan {plan_digest(steps)}", flush=True)
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
                           mirror_repository=MIRROR)
    except ValueError as e:
        parser.error(str(e))
    print(f"  cluster: {spec.describe()}", flush=True)
    with terminate_as_exit():
        outcome = execute(args, spec, steps)
    if args.summary_json is not None:
        args.summary_json.write_text(json.dumps(outcome.summary(), indent=2) + "\n")
    return outcome.exit_status


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
    run: ChaosRun | None = None
    converged: bool = False
    #: the harness's own failure (exit status 2), not an invariant violation
    error: str = ""
    wall_seconds: float = 0.0

    @property
    def violations(self) -> list[str]:
        return [str(v) for v in self.run.checker.violations] if self.run else []

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
        stats = self.run.checker.stats if self.run else None
        return {
            "seed": self.seed, "ops": self.ops, "plan": self.plan,
            "combination": {"mirrors_db": self.spec.mirrors_db, "storage": self.spec.storage_label,
                            "replication": self.spec.replication, "policy": self.spec.policy,
                            "sidecars_per_region": self.spec.sidecars_per_region},
            "steps": sum(done.values()),
            "step_kinds": dict(sorted(done.items())),
            "kills": done["kill"],
            "commits_verified": stats.commits_verified if stats else 0,
            "objects_compared": stats.objects_compared if stats else 0,
            "violations": self.violations,
            "failures": self.failures,
            "converged": self.converged,
            "exit_status": self.exit_status,
            "wall_seconds": round(self.wall_seconds, 1),
        }


def execute(args: argparse.Namespace, spec: ClusterSpec, steps: Sequence[Step]) -> Outcome:
    """Run the plan on a fresh cluster, print the report, return the outcome."""
    outcome = Outcome(args.seed, args.ops, plan_digest(steps), spec)
    started = time.monotonic()
    try:
        with scratch_dir(args.data_dir, "lakefs-chaos-") as root, \
                start_cluster(root, spec) as cluster:
            run = outcome.run = ChaosRun(cluster, args.seed, verbose=args.verbose)
            try:
                run.set_up()
                run.checker.wait_in_sync(90, "the first promotion")
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
    checker = outcome.run.checker
    print(f"  steps: {', '.join(f'{k} {v}' for k, v in sorted(outcome.run.done.items()))}")
    print(f"  checker: {checker.summary()}")
    for v in checker.violations:
        print(f"  VIOLATION {v}")
    converged = outcome.converged and not outcome.run.stalls
    verdict = "ok" if outcome.exit_status == 0 else "FAILED"
    print(f"chaos: seed {args.seed}, {args.ops} steps: {len(checker.violations)} violations, "
          f"{'converged' if converged else 'did not converge'}, "
          f"{outcome.wall_seconds:.0f}s: {verdict}", flush=True)
    return outcome


if __name__ == "__main__":
    sys.exit(main())
