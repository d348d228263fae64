"""The DR drill: ``python -m e2e.drill [--duration S] [--seed N] [--quick]`` (``make drill``).

Two regions of real processes (:mod:`e2e.cluster`: local storage, SQLite, the builtin
object copier), one repository ``drill`` in ``east`` mirrored to ``west`` under the
same name, and a workload committing small changes to two branches every 100-300 ms
all along (:mod:`e2e.writer`), each acknowledged commit recorded with its time. Then,
in order, each after ``--duration`` seconds of the workload:

1. a planned switchover east -> west while the workload writes to east (the freeze
   refuses its writes; it then writes to west, the new primary), and
2. a switchover back, west -> east;
3. an unplanned failover: ``kill -9`` of east's server and sidecar while a commit is
   on its way, in a burst of commits (two of them just acknowledged), the mirror
   detached in west, the workload on west;
4. a failback: east's processes restarted, the failback run from west, every head
   east made that never reached west kept on a ``failover-*`` branch.

For each phase it prints the RPO: what the mirror's status bounded just before the
kill (commits and seconds at risk, from its honest lag and confirmation times, design
I6) next to what was lost (acknowledged commits reachable from no branch of the new
primary, the kept failover branches included; design I7); the RTO: from the event to
the first write the new primary accepted; what failback kept; the API's phase
timings. At the end every acknowledged commit must be reachable from both regions.

Exit status: 0 nothing lost; 1 a commit lost (any at all in a switchover, outside the
stated bound in a failover, any after failback) or a diverged commit the failback did
not keep; 2 the drill itself failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from e2e.cluster import Cluster, ClusterSpec, scratch_dir, start_cluster
from e2e.ledger import AckedCommit, RpoBound, unreachable
from e2e.processes import terminate_as_exit
from e2e.writer import CommitWriter
from lakefs_testing.waiting import wait_for

PhaseKind = Literal["switchover", "failover", "failback", "end"]
REPO = "drill"
BRANCHES = ("main", "etl")
SPEC = ClusterSpec(mirrors_db="sqlite", refstore="local", storage="local",
                   replication="builtin", interval="1s", log_level="INFO", policy="broad",
                   source_repository=REPO, mirror_repository=REPO)
#: commits the workload makes one after the other just before the kill
BURST = 4
#: seconds of workload per phase: by default, and with --quick
DURATION, QUICK_DURATION = 15.0, 3.0


def say(text: str = "") -> None:
    print(text, flush=True)


def short(commits: Sequence[AckedCommit], limit: int = 6) -> str:
    shown = ", ".join(map(str, commits[:limit]))
    return shown + (f" and {len(commits) - limit} more" if len(commits) > limit else "")


@dataclass
class PhaseResult:
    """What one phase of the drill did and found.

    Attributes:
        kind: which step of the drill.
        title: what happened (``switchover east -> west``).
        old: the primary before the phase; new: after it.
        event_at: unix time of the event (the request sent, the kill).
        first_write: the first commit the new primary acknowledged after the event.
        refused: writes refused between the event and that first write.
        refused_by_new: of those, the new primary's refusals (status and message).
        acked_by_old: commits the old primary ever acknowledged.
        lost: of those, the ones reachable from no branch of the new primary.
        bound: the mirror's status read just before the kill (failover).
        at_risk: commits acknowledged by the old primary the bound does not cover.
        missing: commits of the old primary the new one lacked when it took writes.
        outside: missing commits the bound said were safe.
        kept: the failback's kept heads (its answer's ``kept``).
        unkept: missing commits reachable from no kept head.
        api_phases: the handover's ``phases`` (name, seconds).
        timings: other durations worth showing (detach, restart, catch-up), seconds.
        problems: what fails the drill.
    """

    kind: PhaseKind
    title: str
    old: str
    new: str
    event_at: float = 0.0
    first_write: AckedCommit | None = None
    refused: int = 0
    refused_by_new: list[str] = field(default_factory=list)
    acked_by_old: int = 0
    lost: list[AckedCommit] = field(default_factory=list)
    bound: RpoBound | None = None
    at_risk: list[AckedCommit] = field(default_factory=list)
    missing: list[AckedCommit] = field(default_factory=list)
    outside: list[AckedCommit] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)
    unkept: list[AckedCommit] = field(default_factory=list)
    api_phases: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def rto_seconds(self) -> float | None:
        return None if self.first_write is None else self.first_write.acked_at - self.event_at

    @property
    def kept_commits(self) -> int:
        """Diverged commits reachable from a kept head."""
        return len(self.missing) - len(self.unkept)

    @property
    def seconds_at_risk(self) -> float | None:
        return None if self.bound is None else self.bound.seconds_at_risk(self.event_at)

    # ----------------------------------------------------------- accounting
    def account_switchover(self, acked: Sequence[AckedCommit], reachable: Collection[str]
                           ) -> None:
        """``acked``: every commit the old primary acknowledged; ``reachable``: the new
        primary's commits. A switchover loses none (RPO 0)."""
        self.acked_by_old = len(acked)
        self.lost = unreachable(acked, reachable)
        if self.lost:
            self.problems.append(f"a switchover lost {len(self.lost)} commit(s): "
                                 f"{short(self.lost)}")

    def account_failover(self, bound: RpoBound, acked: Sequence[AckedCommit],
                         reachable: Collection[str]) -> None:
        """``bound``: the status read before the kill (at :attr:`event_at`); ``acked``:
        every commit the old primary acknowledged; ``reachable``: the new primary's
        commits once it took writes. What it lacks must be within the bound."""
        self.bound = bound
        self.at_risk = bound.at_risk([c for c in acked if c.acked_at <= self.event_at])
        self.missing = unreachable(acked, reachable)
        self.outside = bound.outside(self.missing)
        if self.outside:
            self.problems.append(
                f"{len(self.outside)} commit(s) the status said were confirmed were not in "
                f"{self.new}: {short(self.outside)}")

    def account_failback(self, missing: Sequence[AckedCommit], acked: Sequence[AckedCommit],
                         *, kept: Collection[str], reachable: Collection[str]) -> None:
        """``missing``: the commits the failover lacked; ``acked``: every commit the old
        primary acknowledged; ``kept``: the commits reachable from the kept heads;
        ``reachable``: the new primary's commits after the failback. Each missing
        commit must be kept, and none lost."""
        self.missing = list(missing)
        self.unkept = unreachable(missing, kept)
        self.acked_by_old = len(acked)
        self.lost = unreachable(acked, reachable)
        if self.unkept:
            self.problems.append(f"failback did not keep {len(self.unkept)} diverged "
                                 f"commit(s): {short(self.unkept)}")
        if self.lost:
            self.problems.append(f"{len(self.lost)} commit(s) acknowledged by {self.old} "
                                 f"were lost: {short(self.lost)}")

    def account_end(self, acked: Sequence[AckedCommit], reachable: Collection[str]) -> None:
        """``acked``: every commit acknowledged anywhere; ``reachable``: the primary's."""
        self.acked_by_old = len(acked)
        self.lost = unreachable(acked, reachable)
        if self.lost:
            self.problems.append(f"{len(self.lost)} acknowledged commit(s) are not in "
                                 f"{self.old}: {short(self.lost)}")

    # --------------------------------------------------------------- output
    def print(self) -> None:
        say(f"\n== {self.title}")
        if self.bound is not None:
            say(f"  RPO bound   {len(self.at_risk)} commit(s), {self.seconds_at_risk:.2f}s at "
                f"risk (status lag {self.bound.lag_seconds:.2f}s, read "
                f"{self.event_at - self.bound.read_at:.2f}s before the kill)")
            say(f"  not copied  {len(self.missing)} commit(s) acknowledged by {self.old} were "
                f"not in {self.new} when it took writes"
                + (f": {short(self.missing)}" if self.missing else "")
                + ("" if not self.missing else
                   " (all within the bound)" if not self.outside else
                   f"; {len(self.outside)} OUTSIDE the bound: {short(self.outside)}"))
        if self.acked_by_old:
            say(f"  RPO         {len(self.lost)} of {self.acked_by_old} commit(s) acknowledged "
                f"by {self.old} lost" + (f": {short(self.lost)}" if self.lost else ""))
        if self.kind == "failback":
            say(f"  diverged    {len(self.missing)} commit(s) of {self.old} never reached "
                f"{self.new}; {self.kept_commits} reachable from the kept heads")
        for k in self.kept:
            say(f"  kept        {k['kind']} {k['ref']} at {str(k['commit_id'])[:12]} on "
                f"{k['branch']}")
        if self.unkept:
            say(f"  NOT KEPT    {short(self.unkept)}")
        rto = self.rto_seconds
        say("  RTO         " + (f"{rto:.2f}s to the first write {self.new} accepted "
                                 f"({self.refused} refused meanwhile)" if rto is not None
                                 else f"no write accepted by {self.new}"))
        for refusal in self.refused_by_new:
            say(f"  refused by  {self.new}: {refusal}")
        if self.api_phases:
            say("  API         " + ", ".join(f"{p['phase']} {float(p['seconds']):.2f}s"
                                             for p in self.api_phases))
        if self.timings:
            say("  timings     " + ", ".join(f"{k} {v:.2f}s" for k, v in self.timings.items()))
        for problem in self.problems:
            say(f"  PROBLEM     {problem}")

    def summary(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "title": self.title, "old": self.old, "new": self.new,
            "rto_seconds": None if self.rto_seconds is None else round(self.rto_seconds, 3),
            "refused": self.refused, "refused_by_new": self.refused_by_new,
            "acked_by_old": self.acked_by_old,
            "lost": [c.commit_id for c in self.lost],
            "at_risk_commits": len(self.at_risk) if self.bound else None,
            "at_risk_seconds": (None if self.seconds_at_risk is None
                                else round(self.seconds_at_risk, 3)),
            "status_lag_seconds": self.bound.lag_seconds if self.bound else None,
            "missing": [c.commit_id for c in self.missing],
            "outside_bound": [c.commit_id for c in self.outside],
            "kept": self.kept, "kept_commits": self.kept_commits,
            "unkept": [c.commit_id for c in self.unkept],
            "api_phases": self.api_phases,
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
            "problems": self.problems,
        }


class Drill:
    """The drill's steps against a running cluster (see the module doc)."""

    def __init__(self, cluster: Cluster, *, seed: int, duration: float,
                 handover_timeout: float) -> None:
        self.cluster = cluster
        self.duration = duration
        self.handover_timeout = handover_timeout
        self.clients = {name: r.client(timeout=30) for name, r in cluster.regions.items()}
        self.writer = CommitWriter({name: r.client(timeout=10)
                                    for name, r in cluster.regions.items()},
                                   REPO, BRANCHES, "east", seed=seed)
        self.phases: list[PhaseResult] = []

    def close(self) -> None:
        self.writer.stop()
        for client in (*self.clients.values(), *self.writer.clients.values()):
            client.close()

    # ------------------------------------------------------------ helpers
    def reachable(self, region: str, refs: Sequence[str] | None = None) -> set[str]:
        """Every commit id reachable from ``refs`` (every branch by default) in ``region``."""
        client = self.clients[region]
        heads = list(client.branches(REPO).values()) if refs is None else list(refs)
        seen: set[str] = set()
        for head in heads:
            if head and head not in seen:
                seen.update(str(c["id"]) for c in client.log(REPO, head))
        return seen

    def in_sync(self, region: str, mirror_id: str,
                heads: dict[str, str] | None = None) -> bool:
        """The mirror is active and serves the source's head on every branch, confirmed;
        with ``heads``, the source's heads as they are now: "current" says the mirror
        was at the source's head a moment ago (its lag is within the status's bound),
        not that it already has a commit made since."""
        status = self.clients[region].mirror_status(REPO, mirror_id)
        rows = {b["branch"]: b for b in status["branches"]}
        return (status["mirror"]["state"] == "active" and set(BRANCHES) <= set(rows)
                and all(r["mirror_head"] == r["source_head"] and r["current"]
                        for r in rows.values())
                and all(rows[b]["source_head"] == h for b, h in (heads or {}).items()
                        if b in rows))

    def following(self, region: str, mirror_id: str) -> bool:
        """The mirror is active and has read the source's every branch once."""
        status = self.clients[region].mirror_status(REPO, mirror_id)
        rows = {b["branch"] for b in status["branches"]}
        return status["mirror"]["state"] == "active" and set(BRANCHES) <= rows

    def work(self, seconds: float) -> None:
        """Let the workload run."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.writer.failure is None:
            time.sleep(0.1)
        if self.writer.failure is not None:
            raise RuntimeError(f"the workload stopped: {self.writer.failure!r}")

    def redirect(self, phase: PhaseResult) -> None:
        """Point the workload at the new primary (if it is not already) and wait for the
        first write it accepted after the event."""
        redirected = time.time()
        moved = self.writer.region != phase.new
        self.writer.redirect(phase.new)
        first = phase.first_write = self.writer.wait_for_ack(phase.new, after=phase.event_at,
                                                             timeout=60)
        if moved:
            phase.timings["redirect to first write"] = first.acked_at - redirected
        refused = [r for r in self.writer.refused(after=phase.event_at)
                   if r.at <= first.acked_at]
        phase.refused = len(refused)
        # the new primary refusing writes once the handover answered is worth seeing
        phase.refused_by_new = [f"{r.status} {r.message[:160]}" for r in refused
                                if r.region == phase.new]

    # -------------------------------------------------------------- steps
    def set_up(self) -> str:
        """The source repository in east, both branches, and its mirror in west in sync;
        the mirror's id."""
        east = self.clients["east"]
        east.create_repository(REPO, self.cluster.east.namespace(REPO))
        east.upload(REPO, "main", "README", b"the DR drill's repository\n")
        east.commit(REPO, "main", "first commit")
        for branch in BRANCHES[1:]:
            east.create_branch(REPO, branch, "main")
        mirror = east.request("POST", f"/service/replication/v1/repositories/{REPO}/mirrors",
                              expect=(201,), json={
                                  "region": "west",
                                  "storage_namespace": self.cluster.west.namespace(REPO)}
                              ).json()
        assert mirror["name"] == REPO, mirror  # the documented default: the same name
        wait_for(lambda: self.in_sync("west", mirror["id"]), 90, 0.2,
                 what="the mirror in west to catch up")
        return str(mirror["id"])

    def switchover(self, mirror_id: str, old: str, new: str) -> tuple[PhaseResult, str]:
        """Planned switchover to ``new`` while the workload writes to ``old``; RPO 0."""
        phase = PhaseResult("switchover", f"planned switchover {old} -> {new}", old, new)
        phase.event_at = time.time()
        answer = _done(self.clients[new].switchover(REPO, mirror_id, self.handover_timeout))
        phase.timings["request"] = time.time() - phase.event_at
        phase.api_phases = list(answer["phases"])
        self.redirect(phase)
        phase.account_switchover(self.writer.ledger.commits(old), self.reachable(new))
        return phase, str(answer["mirror"]["id"])

    def failover(self, mirror_id: str, old: str, new: str) -> PhaseResult:
        """``kill -9`` of ``old`` mid-write, the mirror detached in ``new``."""
        phase = PhaseResult("failover", f"failover: kill -9 {old}, detach {new}", old, new)
        status = self.clients[new].mirror_status(REPO, mirror_id)
        bound = RpoBound.from_status(status, time.time())
        # mid-write, in a burst: two commits just acknowledged, the next one on its way
        self.writer.burst(BURST)
        last = self.writer.wait_for_ack(old, after=time.time(), timeout=30)
        last = self.writer.wait_for_ack(old, after=last.acked_at, timeout=30)
        if not self.writer.committing.wait(10):
            raise TimeoutError(f"the workload sent no commit to {old} within 10s")
        self.cluster.kill_region(old)
        phase.event_at = time.time()
        phase.timings["kill after the last ack"] = phase.event_at - last.acked_at
        self.clients[new].detach_mirror(REPO, mirror_id)
        phase.timings["detach"] = time.time() - phase.event_at
        self.redirect(phase)
        phase.account_failover(bound, self.writer.ledger.commits(old), self.reachable(new))
        return phase

    def failback(self, mirror_id: str, old: str, new: str,
                 failover: PhaseResult) -> tuple[PhaseResult, str]:
        """Restart ``old``, fail back from ``new``: ``old`` follows, its diverged heads kept."""
        phase = PhaseResult("failback", f"failback: {old} back, follows {new}", old, new)
        started = time.time()
        self.cluster.regions[old].start()
        phase.timings["restart"] = time.time() - started
        phase.event_at = time.time()
        answer = _done(self.clients[new].failback(REPO, mirror_id, self.handover_timeout))
        phase.timings["request"] = time.time() - phase.event_at
        phase.api_phases = list(answer["phases"])
        phase.kept = list(answer["kept"])
        self.redirect(phase)
        phase.account_failback(
            failover.missing, self.writer.ledger.commits(old),
            kept=self.reachable(new, [str(k["commit_id"]) for k in phase.kept]),
            reachable=self.reachable(new))
        failover.lost = phase.lost
        return phase, str(answer["mirror"]["id"])

    def finish(self, mirror_id: str, primary: str, follower: str) -> PhaseResult:
        """The workload stops; every acknowledged commit must be reachable in both regions
        once the follower caught up."""
        phase = PhaseResult("end", f"end: every commit in {primary} and {follower}",
                            primary, follower)
        self.writer.stop()
        acked = self.writer.ledger.commits()
        phase.account_end(acked, self.reachable(primary))
        heads = {b: h for b, h in self.clients[primary].branches(REPO).items()
                 if b in BRANCHES}
        started = time.monotonic()
        try:
            wait_for(lambda: self.in_sync(primary, mirror_id, heads), 120, 0.2,
                     what=f"{follower} to follow {primary}")
        except AssertionError as e:
            phase.problems.append(str(e))
        else:
            phase.timings[f"{follower} caught up"] = time.monotonic() - started
            behind = unreachable(acked, self.reachable(follower))
            if behind:
                phase.problems.append(f"{len(behind)} acknowledged commit(s) are not in "
                                      f"{follower}: {short(behind)}")
        say(f"\n== {phase.title}")
        say(f"  {len(acked)} commit(s) acknowledged in all, "
            f"{len(self.writer.refused())} write(s) refused in all")
        for k, v in phase.timings.items():
            say(f"  {k} in {v:.2f}s")
        for problem in phase.problems:
            say(f"  PROBLEM     {problem}")
        return phase

    def run(self) -> None:
        """Every step, in order (see the module doc)."""
        mirror_id = self.set_up()
        say(f"  mirror {mirror_id}: {REPO} in east -> {REPO} in west, in sync; the workload "
            f"starts on east ({', '.join(BRANCHES)})")
        self.writer.start()
        self.work(self.duration)
        phase, mirror_id = self.switchover(mirror_id, "east", "west")
        self.record(phase)
        self.work_while_following("east", mirror_id)
        phase, mirror_id = self.switchover(mirror_id, "west", "east")
        self.record(phase)
        self.work_while_following("west", mirror_id)
        failover = self.failover(mirror_id, "east", "west")
        self.record(failover)
        self.work(self.duration)
        phase, mirror_id = self.failback(mirror_id, "east", "west", failover)
        self.record(phase)
        self.work(min(self.duration, 5.0))
        self.phases.append(self.finish(mirror_id, "west", "east"))

    def work_while_following(self, follower: str, mirror_id: str) -> None:
        """Let the workload run, and the new mirror in ``follower`` read every branch."""
        started = time.monotonic()
        wait_for(lambda: self.following(follower, mirror_id), 60, 0.2,
                 what=f"the mirror in {follower} to follow")
        self.work(max(0.0, self.duration - (time.monotonic() - started)))

    def record(self, phase: PhaseResult) -> None:
        self.phases.append(phase)
        phase.print()


# ------------------------------------------------------------------------ report
def report(phases: Sequence[PhaseResult]) -> None:
    """The compact table at the end: one line a phase."""
    say("\nDR drill report")
    say(f"  {'phase':<36} {'RPO bound':>15} {'not copied':>10} {'lost':>5} {'kept':>7} "
        f"{'RTO':>7}")
    say("  RPO bound: commits / seconds at risk by the mirror's status just before the "
        "kill;\n  lost: acknowledged, reachable from no branch after the phase (a "
        "failover's: after the failback);\n  kept: diverged commits reachable from the "
        "failover branches")
    for p in phases:
        bound = (f"{len(p.at_risk)} / {p.seconds_at_risk:.1f}s" if p.bound is not None
                 else "0 (switchover)" if p.kind == "switchover" else "-")
        kept = (f"{p.kept_commits} of {len(p.missing)}" if p.kind == "failback" else "-")
        rto = f"{p.rto_seconds:.2f}s" if p.rto_seconds is not None else "-"
        not_copied = str(len(p.missing)) if p.kind == "failover" else "-"
        say(f"  {p.title:<36} {bound:>15} {not_copied:>10} {len(p.lost):>5} {kept:>7} "
            f"{rto:>7}")


def exit_status(phases: Sequence[PhaseResult], error: str = "") -> int:
    """2: the drill itself failed; 1: a phase found a problem (a commit lost, one not
    kept); 0: nothing lost."""
    if error:
        return 2
    return 1 if any(p.problems for p in phases) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.drill",
        description="A disaster-recovery drill on two regions of real processes: planned "
                    "switchover and back, kill -9 and failover, failback; prints RPO and "
                    "RTO per phase and exits 1 when a commit was lost.")
    parser.add_argument("--duration", type=float,
                        help=f"seconds of workload per phase (default {DURATION:g}, "
                             f"{QUICK_DURATION:g} with --quick)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true",
                        help="the short version (CI): a few seconds of workload per phase")
    parser.add_argument("--handover-timeout", type=float, default=60.0,
                        help="timeout_seconds of the switchover and failback requests")
    parser.add_argument("--data-dir", type=Path, help="keep data and logs here")
    parser.add_argument("--summary-json", type=Path,
                        help="write the drill's figures here (JSON), whatever the outcome")
    args = parser.parse_args(argv)
    duration = args.duration if args.duration is not None else (
        QUICK_DURATION if args.quick else DURATION)
    say(f"DR drill: seed {args.seed}, {duration:g}s of workload per phase; cluster: "
        f"{SPEC.describe()}")
    started = time.monotonic()
    phases: list[PhaseResult] = []
    error = ""
    with terminate_as_exit():
        try:
            with scratch_dir(args.data_dir, "lakefs-drill-") as root, \
                    start_cluster(root, SPEC) as cluster:
                drill = Drill(cluster, seed=args.seed, duration=duration,
                              handover_timeout=args.handover_timeout)
                phases = drill.phases
                try:
                    drill.run()
                finally:
                    drill.close()
        except Exception as e:  # noqa: BLE001 - any failure of the drill itself: exit 2
            traceback.print_exc()
            error = f"{type(e).__name__}: {e}".splitlines()[0][:500]
    problems = [p for phase in phases for p in phase.problems]
    status = exit_status(phases, error)
    report(phases)
    wall = time.monotonic() - started
    verdict = {0: "ok: nothing lost", 1: f"FAILED: {len(problems)} problem(s)",
               2: f"the drill itself failed: {error}"}[status]
    say(f"DR drill: seed {args.seed}, {wall:.0f}s: {verdict}")
    if args.summary_json is not None:
        args.summary_json.write_text(json.dumps({
            "seed": args.seed, "duration": duration, "exit_status": status, "error": error,
            "wall_seconds": round(wall, 1), "phases": [p.summary() for p in phases],
        }, indent=2) + "\n")
    return status


def _done(response: httpx.Response) -> dict[str, Any]:
    """A handover's answer; a refusal (409) ends the drill as a failure of its own."""
    if response.status_code != 200:
        raise RuntimeError(f"{response.request.url.path}: {response.status_code} "
                           f"{response.text}")
    answer: dict[str, Any] = response.json()
    return answer


if __name__ == "__main__":
    sys.exit(main())

