"""Long chaos campaigns: ``python -m e2e.chaos_long --seeds N --ops M`` (``make chaos-long``).

Runs ``python -m e2e.chaos`` for seeds ``--first-seed`` .. ``+N-1``, ``--jobs`` at a
time, each in a process group of its own with its own two-region cluster. A seed
fixes its combination of mirrors table (sqlite, postgres, dynamodb), storage (local,
s3), object replication (builtin, native) and replication user's policy (narrow,
broad): 24 combinations, all of them in any 24 consecutive seeds
(:func:`combination_for`), with every dimension changing from one seed to the next.

``--storages`` widens (or narrows) the storage dimension to other stores: ``local``,
``s3``, ``azure`` (Azurite), ``gs`` (the Cloud Storage emulator), each for both regions;
``--cross-cloud`` adds every ordered pair of two of them (the source region on one, the
destination on the other). Combinations that cannot run are left out of the cycle:
``native`` replication stands for S3 bucket replication, so it runs only with both
regions on ``local`` or both on ``s3``; the others use the builtin copier. The default
(``local,s3``, no pairs) is the 24-combination cycle above, seed for seed, so a campaign
resumes with the same options it started with.

``--handover`` has every run's plan move the primary between the regions too
(switchovers, failovers and their failbacks: ``python -m e2e.chaos --handover``); its
records are kept apart from those of runs without, so one results file may hold both.
``--regions 3`` and ``--groups`` give every run that topology (a third region, a second
repository and a mirror group into each destination, I8 checked: ``python -m e2e.chaos
--regions 3 --groups``); their records are kept apart likewise. ``--sidecars 2`` runs
two replication services per region in every run (``python -m e2e.chaos --sidecars 2``:
the replicas share the mirrors through their leases); kept apart likewise.

Every finished run appends one JSON line to ``--results`` (the chaos run's summary,
its log file, when it finished). ``--resume`` skips the seeds already there (with the
same ``--ops``), so an interrupted campaign continues where it stopped; without it an
existing results file is refused. At the end one summary is printed, overall and per
combination: runs, steps, kills, switchovers, failovers, failbacks, commits verified,
violations, failures.

Ctrl-C (or SIGTERM) stops every running chaos run (SIGTERM to its process group, then
SIGKILL after a grace period); the runs it stopped are not recorded, so ``--resume``
runs them again. Exit status: 0 every recorded run passed, 1 some run found a
violation or failed, 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from e2e.processes import terminate_as_exit

MIRRORS_DBS = ("sqlite", "postgres", "dynamodb")
#: the storages of the default cycle (each for both regions)
STORAGES = ("local", "s3")
#: every storage ``--storages`` may name
ALL_STORAGES = ("local", "s3", "azure", "gs")
#: the storages where ``native`` replication runs (both regions alike)
NATIVE_STORAGES = ("local", "s3")
REPLICATIONS = ("builtin", "native")
POLICIES = ("narrow", "broad")
#: how many distinct combinations the default cycle goes through
CYCLE = len(MIRRORS_DBS) * len(STORAGES) * len(REPLICATIONS) * len(POLICIES)
#: seconds a stopped run gets to stop its cluster before it is killed
GRACE = 30.0
#: the project's root: the runs import this checkout's packages
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, order=True)
class Combination:
    """What one chaos run runs on."""

    mirrors_db: str
    storage: str
    replication: str
    policy: str

    def __str__(self) -> str:
        return f"{self.mirrors_db}/{self.storage}/{self.replication}/{self.policy}"

    def argv(self) -> list[str]:
        return ["--mirrors-db", self.mirrors_db, "--storage", self.storage,
                "--replication", self.replication, "--policy", self.policy]

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Combination:
        c = record["combination"]
        return cls(c["mirrors_db"], c["storage"], c["replication"], c["policy"])


def storage_labels(storages: Sequence[str] = STORAGES, *, cross: bool = False
                   ) -> list[str]:
    """The storage dimension: each storage for both regions (``s3``), then with
    ``cross`` every ordered pair of two (``s3,azure``: source, destination)."""
    labels = list(dict.fromkeys(storages))
    if cross:
        labels += [f"{a},{b}" for a in dict.fromkeys(storages)
                   for b in dict.fromkeys(storages) if a != b]
    return labels


def runs_on(storage: str, replication: str) -> bool:
    """Whether a chaos run can use ``replication`` on ``storage``."""
    return replication != "native" or storage in NATIVE_STORAGES


def cycle(storages: Sequence[str] = STORAGES, *, cross: bool = False
          ) -> list[tuple[str, str, str]]:
    """The (storage, replication, policy) choices that can run, in the cycle's order:
    storage slowest, policy fastest."""
    return [(st, rep, pol) for st in storage_labels(storages, cross=cross)
            for rep in REPLICATIONS for pol in POLICIES if runs_on(st, rep)]


def combination_for(seed: int, storages: Sequence[str] = STORAGES, *,
                    cross: bool = False) -> Combination:
    """The combination of ``seed``.

    ``i = seed - 1``; ``m`` is the number of storage, replication and policy choices
    that can run (:func:`cycle`; 8 by default). When 3 and ``m`` are coprime the
    mirrors table is ``i mod 3`` and the rest choice ``i mod m`` (by default the bits
    of ``i mod 8``: storage, replication, policy); otherwise, with ``k = i mod 3m``,
    the table is ``k mod 3`` and the rest choice ``(k div 3 + k mod 3) mod m``. Either
    way any ``3m`` consecutive seeds give every combination once.
    """
    choices = cycle(storages, cross=cross)
    if not choices:
        raise ValueError("no combination can run on these storages")
    i, m = seed - 1, len(choices)
    if math.gcd(3, m) == 1:
        db, rest = i % 3, choices[i % m]
    else:
        k = i % (3 * m)
        db, rest = k % 3, choices[(k // 3 + k % 3) % m]
    return Combination(MIRRORS_DBS[db], *rest)


# ------------------------------------------------------------------------- results
def load_results(path: Path) -> list[dict[str, Any]]:
    """The records of a results file (none if it does not exist); a torn last line
    (the machine stopped while writing it) is ignored."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            record = json.loads(line)
            if isinstance(record, dict) and "seed" in record:
                records.append(record)
    return records


def latest_by_seed(records: Iterable[dict[str, Any]], ops: int, *, handover: bool = False,
                   regions: int = 2, groups: bool = False,
                   sidecars: int = 1) -> dict[int, dict[str, Any]]:
    """Seed -> its last record with ``ops`` steps, handovers or not, on ``regions``
    regions, with groups or not, with ``sidecars`` replication services per region."""
    return {int(r["seed"]): r for r in records
            if r.get("ops") == ops and bool(r.get("handover")) == handover
            and int(r.get("regions", 2)) == regions and bool(r.get("groups")) == groups
            and _sidecars_of(r) == sidecars}


def _sidecars_of(record: dict[str, Any]) -> int:
    return int(record.get("combination", {}).get("sidecars_per_region", 1))


def pending_seeds(seeds: Sequence[int], done: dict[int, dict[str, Any]]) -> list[int]:
    return [s for s in seeds if s not in done]


def append_result(path: Path, record: dict[str, Any]) -> None:
    """Append one record as a line, on disk before returning (after a torn last line,
    on a line of its own)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torn = False
    if path.exists() and path.stat().st_size > 0:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            torn = f.read(1) != b"\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(("\n" if torn else "") + json.dumps(record, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def passed(record: dict[str, Any]) -> bool:
    return int(record.get("exit_status", 2)) == 0


@dataclass
class Totals:
    """Figures summed over runs."""

    runs: int = 0
    passed: int = 0
    steps: int = 0
    kills: int = 0
    switchovers: int = 0
    failovers: int = 0
    failbacks: int = 0
    pipelines: int = 0
    group_reads: int = 0
    commits_verified: int = 0
    violations: int = 0
    failures: int = 0
    wall_seconds: float = 0.0

    def add(self, record: dict[str, Any]) -> None:
        self.runs += 1
        self.passed += passed(record)
        self.steps += int(record.get("steps", 0))
        self.kills += int(record.get("kills", 0))
        self.switchovers += int(record.get("switchovers", 0))
        self.failovers += int(record.get("failovers", 0))
        self.failbacks += int(record.get("failbacks", 0))
        self.pipelines += int(record.get("pipelines", 0))
        self.group_reads += int(record.get("group_reads", 0))
        self.commits_verified += int(record.get("commits_verified", 0))
        self.violations += len(record.get("violations", ()))
        # a run that failed without naming why still counts as a failure
        self.failures += len(record.get("failures", ())) or \
            int(not passed(record) and not record.get("violations"))
        self.wall_seconds += float(record.get("wall_seconds", 0.0))


@dataclass
class Summary:
    total: Totals = field(default_factory=Totals)
    per_combination: dict[Combination, Totals] = field(default_factory=dict)
    failed: list[dict[str, Any]] = field(default_factory=list)


def summarize(records: Iterable[dict[str, Any]]) -> Summary:
    summary = Summary()
    for record in sorted(records, key=lambda r: int(r["seed"])):
        summary.total.add(record)
        combo = Combination.from_record(record)
        summary.per_combination.setdefault(combo, Totals()).add(record)
        if not passed(record):
            summary.failed.append(record)
    return summary


def format_summary(summary: Summary, planned: int) -> str:
    t = summary.total
    lines = [f"chaos-long: {t.runs} of {planned} runs recorded, {t.passed} passed: "
             f"{t.steps} steps, {t.kills} kills, {t.switchovers} switchovers, "
             f"{t.failovers} failovers, {t.failbacks} failbacks, "
             + (f"{t.pipelines} pipelines, {t.group_reads} group reads (I8), "
                if t.group_reads else "")
             + f"{t.commits_verified} commits verified, "
             f"{t.violations} violations, {t.failures} failures "
             f"({t.wall_seconds / 60:.1f} run-minutes)"]
    if summary.per_combination:
        lines.append(f"  {'combination':<32} {'runs':>4} {'ok':>3} {'steps':>6} {'kills':>5} "
                     f"{'handovers':>9} {'commits':>7} {'violations':>10} {'failures':>8}")
        for combo, c in sorted(summary.per_combination.items()):
            handovers = f"{c.switchovers}/{c.failovers}/{c.failbacks}"
            lines.append(f"  {str(combo):<32} {c.runs:>4} {c.passed:>3} {c.steps:>6} "
                         f"{c.kills:>5} {handovers:>9} {c.commits_verified:>7} "
                         f"{c.violations:>10} {c.failures:>8}")
        lines.append("  (handovers: switchovers/failovers/failbacks)")
    for r in summary.failed:
        why = (r.get("violations") or r.get("failures") or [f"exit status {r.get('exit_status')}"])
        lines.append(f"  FAILED seed {r['seed']} ({Combination.from_record(r)}): {why[0]}"
                     f"{f' (+{len(why) - 1} more)' if len(why) > 1 else ''}; log {r.get('log')}")
    return "\n".join(lines)


# -------------------------------------------------------------------------- runs
@dataclass
class Job:
    """One running ``python -m e2e.chaos``, in its own process group."""

    seed: int
    combination: Combination
    proc: subprocess.Popen[bytes]
    log_path: Path
    summary_path: Path
    log: IO[bytes]
    started: float = field(default_factory=time.monotonic)

    def record(self, ops: int, *, timed_out: bool, handover: bool = False, regions: int = 2,
               groups: bool = False) -> dict[str, Any]:
        """The run's results line: its summary, or what is known when it wrote none."""
        code = self.proc.returncode
        try:
            record: dict[str, Any] = json.loads(self.summary_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            c = self.combination
            record = {"seed": self.seed, "ops": ops, "handover": handover,
                      "regions": regions, "groups": groups, "steps": 0,
                      "kills": 0, "switchovers": 0, "failovers": 0, "failbacks": 0,
                      "commits_verified": 0, "violations": [], "converged": False,
                      "combination": {"mirrors_db": c.mirrors_db, "storage": c.storage,
                                      "replication": c.replication, "policy": c.policy},
                      "failures": [f"no summary written (exit status {code})"],
                      "wall_seconds": round(time.monotonic() - self.started, 1)}
        if timed_out:
            record["failures"] = [*record.get("failures", []), "timed out (killed)"]
        record["exit_status"] = 2 if timed_out or code not in (0, 1) else code
        record["log"] = str(self.log_path)
        record["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        return record

    def stop(self, grace: float = GRACE) -> None:
        """SIGTERM to the group (the run stops its cluster), SIGKILL after ``grace``."""
        _signal_group(self.proc, signal.SIGTERM)
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        _signal_group(self.proc, signal.SIGKILL)  # whatever of the group is left
        self.proc.wait()
        self.log.close()


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def data_dir_of(log_path: Path) -> Path:
    """Where a run keeps its servers' data and logs: removed once the run passed, kept
    beside its log when it failed, to find out why."""
    return log_path.with_suffix(".data")


def settle_data_dir(record: dict[str, Any], log_path: Path) -> None:
    """Remove the data of a run that passed; name that of a failed run in its record."""
    data_dir = data_dir_of(log_path)
    if passed(record):
        shutil.rmtree(data_dir, ignore_errors=True)
    else:
        record["data_dir"] = str(data_dir)


def run_options(*, handover: bool = False, regions: int = 2, groups: bool = False,
                sidecars: int = 1) -> list[str]:
    """The options of ``e2e.chaos`` that give every run of a campaign its kind."""
    return [*(["--handover"] if handover else []),
            *(["--regions", str(regions)] if regions != 2 else []),
            *(["--groups"] if groups else []),
            *(["--sidecars", str(sidecars)] if sidecars != 1 else [])]


def start_job(seed: int, ops: int, settle_timeout: float, logs: Path, work: Path,
              combo: Combination, *, handover: bool = False, regions: int = 2,
              groups: bool = False, sidecars: int = 1) -> Job:
    log_path = logs / f"seed-{seed}.log"
    summary_path = work / f"seed-{seed}.json"
    summary_path.unlink(missing_ok=True)
    log = open(log_path, "wb")  # noqa: SIM115 - closed when the job ends
    argv = [sys.executable, "-m", "e2e.chaos", "--seed", str(seed), "--ops", str(ops),
            *combo.argv(), "--settle-timeout", str(settle_timeout),
            "--summary-json", str(summary_path), "--data-dir", str(data_dir_of(log_path)),
            *run_options(handover=handover, regions=regions, groups=groups,
                         sidecars=sidecars)]
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, cwd=ROOT, start_new_session=True)
    return Job(seed, combo, proc, log_path, summary_path, log)


def run_campaign(seeds: Sequence[int], args: argparse.Namespace, logs: Path) -> bool:
    """Run ``seeds``, ``args.jobs`` at a time, appending each result; False if interrupted."""
    queue = list(seeds)
    running: list[Job] = []
    with tempfile.TemporaryDirectory(prefix="chaos-long-") as tmp:
        try:
            while queue or running:
                while queue and len(running) < args.jobs:
                    seed = queue.pop(0)
                    job = start_job(seed, args.ops, args.settle_timeout, logs, Path(tmp),
                                    combination_for(seed, args.storages,
                                                    cross=args.cross_cloud),
                                    handover=args.handover, regions=args.regions,
                                    groups=args.groups, sidecars=args.sidecars)
                    running.append(job)
                    print(f"  seed {job.seed} [{job.combination}] started (log "
                          f"{job.log_path})", flush=True)
                time.sleep(0.5)
                for job in list(running):
                    timed_out = time.monotonic() - job.started > args.run_timeout
                    if timed_out:
                        job.stop()
                    elif job.proc.poll() is None:
                        continue
                    else:
                        job.log.close()
                    running.remove(job)
                    record = job.record(args.ops, timed_out=timed_out,
                                        handover=args.handover, regions=args.regions,
                                        groups=args.groups)
                    settle_data_dir(record, job.log_path)
                    append_result(args.results, record)
                    print(f"  seed {job.seed} [{job.combination}]: "
                          f"{'ok' if passed(record) else 'FAILED'}, {record['steps']} steps, "
                          f"{record['kills']} kills, {record.get('switchovers', 0)}/"
                          f"{record.get('failovers', 0)}/{record.get('failbacks', 0)} "
                          f"switchovers/failovers/failbacks, "
                          f"{record['commits_verified']} commits "
                          f"verified, {len(record['violations'])} violations, "
                          f"{record['wall_seconds']:.0f}s", flush=True)
        except (KeyboardInterrupt, SystemExit):
            # a second Ctrl-C must not cut the clean-up short (it takes at most GRACE)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            print(f"\ninterrupted: stopping {len(running)} run(s), not recorded (at most "
                  f"{GRACE:.0f}s)", flush=True)
            for job in running:
                _signal_group(job.proc, signal.SIGTERM)
            for job in running:
                job.stop()
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.chaos_long",
        description="Many chaos runs in parallel over every combination of mirrors table, "
                    "storage, object replication and replication policy.")
    parser.add_argument("--seeds", type=int, default=24, help="number of seeds (runs)")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--ops", type=int, default=40, help="steps per run")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="runs at once (default: min(2, CPUs))")
    parser.add_argument("--results", type=Path, default=Path("chaos-long.jsonl"),
                        help="JSON lines, one per finished run (default %(default)s)")
    parser.add_argument("--resume", action="store_true",
                        help="continue: skip the seeds already in --results")
    parser.add_argument("--logs", type=Path,
                        help="directory of the runs' logs (default: <results>.logs)")
    parser.add_argument("--settle-timeout", type=float, default=120.0)
    parser.add_argument("--run-timeout", type=float, default=3600.0,
                        help="seconds before a run is stopped and recorded as failed")
    parser.add_argument("--storages", type=_storages, default=STORAGES,
                        metavar="STORE,...",
                        help=f"the storages the seeds cycle through, each for both regions "
                             f"({', '.join(ALL_STORAGES)}; default: "
                             f"{','.join(STORAGES)})")
    parser.add_argument("--handover", action="store_true",
                        help="the runs move the primary too: switchovers, failovers and "
                             "failbacks (e2e.chaos --handover)")
    parser.add_argument("--regions", type=int, choices=(2, 3), default=2,
                        help="3: every run mirrors to a third region too "
                             "(e2e.chaos --regions 3)")
    parser.add_argument("--groups", action="store_true",
                        help="every run has a second repository and a mirror group into "
                             "each destination region, I8 checked (e2e.chaos --groups)")
    parser.add_argument("--sidecars", type=int, default=1,
                        help="replication services per region in every run "
                             "(e2e.chaos --sidecars)")
    parser.add_argument("--cross-cloud", action="store_true",
                        help="also every ordered pair of two of --storages (the source "
                             "region on one, the destination on the other)")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.ops < 1 or args.jobs < 1 or args.sidecars < 1:
        parser.error("--seeds, --ops, --jobs and --sidecars must be at least 1")
    options = ""
    if tuple(args.storages) != STORAGES or args.cross_cloud:
        options = (f" --storages {','.join(args.storages)}"
                   + (" --cross-cloud" if args.cross_cloud else ""))
    if args.handover and (args.regions > 2 or args.groups):
        parser.error("--handover runs on two regions without groups")
    options += "".join(" " + o for o in run_options(
        handover=args.handover, regions=args.regions, groups=args.groups,
        sidecars=args.sidecars))

    def runs_alike(records: Iterable[dict[str, Any]]) -> dict[int, dict[str, Any]]:
        return latest_by_seed(records, args.ops, handover=args.handover,
                              regions=args.regions, groups=args.groups,
                              sidecars=args.sidecars)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    args.results = args.results.resolve()
    existing = load_results(args.results)
    if existing and not args.resume:
        parser.error(f"{args.results} has {len(existing)} result(s): pass --resume to "
                     "continue, or another --results")
    done = runs_alike(existing)
    other = [s for s in seeds if s in done and Combination.from_record(done[s])
             != combination_for(s, args.storages, cross=args.cross_cloud)]
    if other:
        parser.error(f"seed {other[0]} in {args.results} ran "
                     f"{Combination.from_record(done[other[0]])}, not "
                     f"{combination_for(other[0], args.storages, cross=args.cross_cloud)}: "
                     "resume with the --storages (and --cross-cloud) it started with")
    todo = pending_seeds(seeds, done)
    logs = (args.logs or args.results.with_name(args.results.name + ".logs")).resolve()
    logs.mkdir(parents=True, exist_ok=True)
    print(f"chaos-long: seeds {seeds[0]}-{seeds[-1]}, {args.ops} steps each, {args.jobs} "
          f"at once; {len(seeds) - len(todo)} already in {args.results}, {len(todo)} to run",
          flush=True)
    with terminate_as_exit():
        completed = run_campaign(todo, args, logs)
    recorded = runs_alike(load_results(args.results))
    summary = summarize(recorded[s] for s in seeds if s in recorded)
    print(format_summary(summary, len(seeds)), flush=True)
    if not completed:
        print(f"resume with: python -m e2e.chaos_long --seeds {args.seeds} --first-seed "
              f"{args.first_seed} --ops {args.ops}{options} --results {args.results} "
              "--resume")
        return 130
    return 0 if not summary.failed else 1


def _storages(value: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    unknown = [n for n in names if n not in ALL_STORAGES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"{value!r}: expected storages among {', '.join(ALL_STORAGES)}")
    return names


if __name__ == "__main__":
    sys.exit(main())
