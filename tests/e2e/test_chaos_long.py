"""The long-campaign runner's bookkeeping: combinations, results file, resume, summary.

The runs themselves are ``python -m e2e.chaos`` (tested in test_chaos.py); here a
results file stands in for finished runs, so nothing is started.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from e2e.chaos_long import (
    ALL_STORAGES,
    CYCLE,
    MIRRORS_DBS,
    POLICIES,
    REPLICATIONS,
    STORAGES,
    Combination,
    append_result,
    combination_for,
    cycle,
    latest_by_seed,
    load_results,
    main,
    run_options,
    settle_data_dir,
    summarize,
)

ALL = {Combination(*c) for c in itertools.product(MIRRORS_DBS, STORAGES, REPLICATIONS,
                                                   POLICIES)}


def record(seed: int, ops: int = 20, *, status: int = 0, violations: tuple[str, ...] = (),
           failures: tuple[str, ...] = (), steps: int = 20, kills: int = 3,
           commits: int = 10, handovers: tuple[int, int, int] | None = None
           ) -> dict[str, Any]:
    c = combination_for(seed)
    extra: dict[str, Any] = {}
    if handovers is not None:
        extra = {"handover": True, "switchovers": handovers[0], "failovers": handovers[1],
                 "failbacks": handovers[2]}
    return {**extra, "seed": seed, "ops": ops, "exit_status": status, "steps": steps,
            "kills": kills,
            "commits_verified": commits, "violations": list(violations),
            "failures": list(failures), "wall_seconds": 30.0, "log": f"seed-{seed}.log",
            "combination": {"mirrors_db": c.mirrors_db, "storage": c.storage,
                            "replication": c.replication, "policy": c.policy}}


def test_any_24_consecutive_seeds_cover_every_combination() -> None:
    assert CYCLE == len(ALL) == 24
    for first in (1, 7, 100):
        assert {combination_for(s) for s in range(first, first + CYCLE)} == ALL
    # from one seed to the next the mirrors table and the policy always change
    for s in range(1, 30):
        a, b = combination_for(s), combination_for(s + 1)
        assert a.mirrors_db != b.mirrors_db and a.policy != b.policy
    assert combination_for(1) == Combination("sqlite", "local", "builtin", "narrow")


@pytest.mark.parametrize(("storages", "cross", "size"), [
    (("azure", "gs"), False, 12),  # 2 storages x builtin x 2 policies x 3 tables
    (("azure", "gs"), True, 24),  # and the pairs azure,gs and gs,azure
    (ALL_STORAGES, False, 36),  # local and s3 with native too: 3 is no longer coprime
    (ALL_STORAGES, True, 108),
])
def test_wider_storage_cycles_cover_what_can_run(storages: tuple[str, ...], cross: bool,
                                                  size: int) -> None:
    runnable = {Combination(db, *rest) for db in MIRRORS_DBS
                for rest in cycle(storages, cross=cross)}
    assert len(runnable) == size
    for first in (1, 11, 250):
        seen = [combination_for(s, storages, cross=cross) for s in range(first, first + size)]
        assert set(seen) == runnable
    # native replication only where both regions are local or S3 (bucket replication)
    assert all(c.storage in ("local", "s3") for c in runnable if c.replication == "native")
    assert {c.storage for c in runnable} >= set(storages)
    if cross:
        assert "azure,gs" in {c.storage for c in runnable}


def test_resume_refuses_other_storages(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    append_result(path, record(1))
    with pytest.raises(SystemExit) as refused:
        main(["--seeds", "1", "--ops", "20", "--results", str(path), "--resume",
              "--storages", "azure,gs"])
    assert refused.value.code == 2
    with pytest.raises(SystemExit):
        main(["--seeds", "1", "--ops", "20", "--results", str(path), "--storages", "ftp"])


def test_results_survive_a_torn_line_and_resume_by_seed_and_ops(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    assert load_results(path) == []
    for r in (record(1), record(2, status=1, violations=("I2: x",)), record(3, ops=40)):
        append_result(path, r)
    with open(path, "a") as f:
        f.write('{"seed": 4, "ops": 2')  # the machine stopped mid-write
    assert [r["seed"] for r in load_results(path)] == [1, 2, 3]
    done = latest_by_seed(load_results(path), ops=20)
    assert sorted(done) == [1, 2]
    append_result(path, record(2))  # seed 2 again, later: the last record counts
    assert latest_by_seed(load_results(path), ops=20)[2]["exit_status"] == 0


def test_summary_totals_and_per_combination() -> None:
    records = [record(1, kills=2, commits=11),
               record(25, kills=1, commits=9),  # the same combination as seed 1
               record(2, status=1, violations=("I1: a", "I3: b")),
               record(3, status=2, steps=4)]  # a harness failure that named nothing
    summary = summarize(records)
    t = summary.total
    assert (t.runs, t.passed, t.steps, t.kills) == (4, 2, 64, 9)
    assert (t.commits_verified, t.violations, t.failures) == (40, 2, 1)
    first = summary.per_combination[combination_for(1)]
    assert (first.runs, first.kills, first.commits_verified) == (2, 3, 20)
    assert [r["seed"] for r in summary.failed] == [2, 3]


def test_resume_runs_only_what_is_missing(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "results.jsonl"
    for seed in (1, 2, 3):
        append_result(path, record(seed, status=1 if seed == 2 else 0,
                                   violations=("I4: probe landed",) if seed == 2 else ()))
    with pytest.raises(SystemExit) as refused:  # no silent mixing of two campaigns
        main(["--seeds", "3", "--ops", "20", "--results", str(path)])
    assert refused.value.code == 2
    assert main(["--seeds", "3", "--ops", "20", "--results", str(path), "--resume"]) == 1
    out = capsys.readouterr().out
    assert "3 already in" in out and "0 to run" in out and "started" not in out
    assert "3 of 3 runs recorded, 2 passed: 60 steps, 9 kills" in out
    assert "FAILED seed 2" in out and "I4: probe landed" in out
    assert json.loads(path.read_text().splitlines()[0])["seed"] == 1


def test_handover_runs_are_counted_and_resumed_apart(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "results.jsonl"
    append_result(path, record(1))  # a run without handovers, same seed and steps
    for seed, handovers in ((1, (2, 1, 1)), (2, (0, 2, 2))):
        append_result(path, record(seed, handovers=handovers))
    assert sorted(latest_by_seed(load_results(path), 20)) == [1]
    with_handovers = latest_by_seed(load_results(path), 20, handover=True)
    assert sorted(with_handovers) == [1, 2]
    t = summarize(with_handovers.values()).total
    assert (t.switchovers, t.failovers, t.failbacks) == (2, 3, 3)
    assert main(["--seeds", "2", "--ops", "20", "--results", str(path), "--resume",
                 "--handover"]) == 0
    out = capsys.readouterr().out
    assert "0 to run" in out and "2 switchovers, 3 failovers, 3 failbacks" in out


def test_topology_runs_are_counted_and_resumed_apart(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Runs on three regions with groups are another campaign than the two-region one,
    seed for seed; their pipelines and I8 reads are summed."""
    path = tmp_path / "results.jsonl"
    append_result(path, record(1))
    for seed in (1, 2):
        append_result(path, {**record(seed), "regions": 3, "groups": True, "pipelines": 4,
                             "group_reads": 50})
    assert sorted(latest_by_seed(load_results(path), 20)) == [1]
    assert latest_by_seed(load_results(path), 20, regions=3) == {}
    topology = latest_by_seed(load_results(path), 20, regions=3, groups=True)
    assert sorted(topology) == [1, 2]
    assert main(["--seeds", "2", "--ops", "20", "--results", str(path), "--resume",
                 "--regions", "3", "--groups"]) == 0
    out = capsys.readouterr().out
    assert "2 already in" in out and "0 to run" in out
    assert "8 pipelines, 100 group reads (I8)" in out
    with pytest.raises(SystemExit) as refused:
        main(["--seeds", "1", "--ops", "20", "--results", str(path), "--resume",
              "--regions", "3", "--handover"])
    assert refused.value.code == 2


def test_runs_with_two_sidecars_are_counted_and_resumed_apart(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "results.jsonl"
    append_result(path, record(1))  # one replication service per region
    for seed in (1, 2):
        line = record(seed)
        line["combination"]["sidecars_per_region"] = 2
        append_result(path, line)
    assert sorted(latest_by_seed(load_results(path), 20)) == [1]
    assert sorted(latest_by_seed(load_results(path), 20, sidecars=2)) == [1, 2]
    assert main(["--seeds", "2", "--ops", "20", "--results", str(path), "--resume",
                 "--sidecars", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 already in" in out and "0 to run" in out
    # every run of such a campaign is started with the option
    assert run_options(sidecars=2) == ["--sidecars", "2"]
    assert run_options(handover=True) == ["--handover"]
    assert run_options(regions=3, groups=True) == ["--regions", "3", "--groups"]
    with pytest.raises(SystemExit) as refused:
        main(["--seeds", "1", "--ops", "20", "--results", str(path), "--resume",
              "--sidecars", "0"])
    assert refused.value.code == 2


def test_a_failed_run_keeps_its_data_and_a_passed_one_does_not(tmp_path: Path) -> None:
    """Each run keeps its servers' data beside its log (``seed-N.data``): removed when the
    run passed, kept and named in the results line when it failed."""
    for seed, status in ((1, 0), (2, 2)):
        log = tmp_path / f"seed-{seed}.log"
        (tmp_path / f"seed-{seed}.data" / "west").mkdir(parents=True)
        line = record(seed, status=status)
        settle_data_dir(line, log)
        kept = tmp_path / f"seed-{seed}.data"
        assert kept.exists() is (status != 0)
        assert line.get("data_dir") == (str(kept) if status else None)
