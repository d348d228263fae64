"""Garbage collection as a Spark job: retention per branch, staged objects, read-only refusal."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakefs_core.errors import ReadOnlyRepositoryError
from lakefs_core.spark.client import CommitInfo
from lakefs_core.spark.gc import GarbageCollector, RetentionRules, retained_on_branch
from lakefs_core.spark.gc import main as gc_main
from lakefs_core.spark.options import ServerOptions, StorageOptions
from lakefs_testing.live_server import LiveServer
from tests.spark.conftest import commit, create_repo, lakefs_options, upload

DAY = 86_400


def _c(cid: str, date: int, *parents: str) -> CommitInfo:
    return CommitInfo(cid, f"mr-{cid}", parents, date)


def test_retention_keeps_heads_and_commits_current_within_the_window() -> None:
    now = 100 * DAY
    # c1 <- c2 <- c3 (head), and c2 <- m (merge of x) where x <- c1
    log = [_c("c3", now - 1 * DAY, "c2"), _c("c2", now - 10 * DAY, "c1"),
           _c("c1", now - 30 * DAY, "c0"), _c("c0", now - 40 * DAY)]
    assert retained_on_branch(log, "c3", 0, now) == {"c3"}
    # c2 was current until c3 (1 day ago): kept with a 7-day window; c1 was replaced 10 days ago
    assert retained_on_branch(log, "c3", 7, now) == {"c3", "c2"}
    assert retained_on_branch(log, "c3", 15, now) == {"c3", "c2", "c1"}
    assert retained_on_branch(log, "c3", 365, now) == {"c3", "c2", "c1", "c0"}
    with pytest.raises(ValueError, match="negative"):
        RetentionRules(default_retention_days=-1)
    assert RetentionRules(3, {"main": 9}).days_for("main") == 9
    assert RetentionRules(3, {"main": 9}).days_for("dev") == 3


def _address(server: LiveServer, repo: str, ref: str, path: str) -> str:
    with server.client() as c:
        r = c.get(f"/repositories/{repo}/refs/{ref}/objects/stat", params={"path": path})
        assert r.status_code == 200, r.text
        return str(r.json()["physical_address"])


def _local_file(root: str, address: str) -> Path:
    return Path(root) / address.removeprefix("local://")


@pytest.mark.spark
def test_gc_reports_then_deletes_only_unreferenced_objects(
        spark: SparkSession, server: LiveServer, capsys: pytest.CaptureFixture[str]) -> None:
    repo = "gc-1"
    create_repo(server, repo)
    opts = lakefs_options(server, repo)
    root = opts["blockstore_root"]
    with server.client() as c:
        for name in ("dev", "tmp"):
            assert c.post(f"/repositories/{repo}/branches",
                          json={"name": name, "source": "main"}).status_code == 201
    upload(server, repo, "main", "a", b"a-v1")
    upload(server, repo, "main", "b", b"b-v1")
    c1 = commit(server, repo, "main")
    a1, b1 = _address(server, repo, c1, "a"), _address(server, repo, c1, "b")
    with server.client() as c:
        assert c.post(f"/repositories/{repo}/tags", json={"id": "v1", "ref": c1}
                      ).status_code == 201
    upload(server, repo, "main", "a", b"a-v2")
    with server.client() as c:
        assert c.delete(f"/repositories/{repo}/branches/main/objects",
                        params={"path": "b"}).status_code == 204
    commit(server, repo, "main")
    upload(server, repo, "main", "c", b"staged")  # staged, never committed
    upload(server, repo, "dev", "d", b"dev-only")
    commit(server, repo, "dev")
    upload(server, repo, "tmp", "e", b"on a deleted branch")
    commit(server, repo, "tmp")
    e = _address(server, repo, "tmp", "e")
    with server.client() as c:
        assert c.delete(f"/repositories/{repo}/branches/tmp").status_code == 204
    orphan = f"local://{repo}/data/orphan/leftover"
    _local_file(root, orphan).parent.mkdir(parents=True)
    _local_file(root, orphan).write_bytes(b"never staged")
    keep = {p: _address(server, repo, "main", p) for p in ("a", "c")}
    keep["d"] = _address(server, repo, "dev", "d")

    gc = GarbageCollector(spark, ServerOptions.from_options(opts),
                          StorageOptions.from_options(opts))
    later = time.time() + 60
    # main keeps what it replaced within 30 days: c1 (a-v1, b-v1)
    report = gc.run(repo, RetentionRules(0, {"main": 30}, retain_tags=False),
                    min_age_seconds=0, now=later)
    assert report.dry_run and report.deleted == 0
    assert sorted(report.garbage) == sorted([e, orphan])
    assert c1 in report.retained_commits
    # so does the tag on c1
    report = gc.run(repo, RetentionRules(0), min_age_seconds=0, now=later)
    assert sorted(report.garbage) == sorted([e, orphan])
    # without either c1 expires; a dry run (the default) deletes nothing
    # without either c1 expires; the command line runs the same collection, a dry run
    # unless told to delete
    argv = [f"--option={k}={v}" for k, v in opts.items()]
    assert gc_main([*argv, repo, "--retention-days=0", "--no-retain-tags",
                    "--min-age-hours=0"], spark=spark) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["dry_run"] is True and printed["deleted"] == 0
    assert sorted(printed["garbage"]) == sorted([a1, b1, e, orphan])
    assert printed["garbage_bytes"] == len(b"a-v1") + len(b"b-v1") \
        + len(b"on a deleted branch") + len(b"never staged")
    assert c1 in printed["expired_commits"] and printed["staged_objects"] == 1
    assert all(_local_file(root, a).exists() for a in printed["garbage"])
    rules = RetentionRules(0, retain_tags=False)
    # young objects are never collected
    assert gc.run(repo, rules, now=later).garbage == []
    deleted = gc.run(repo, rules, dry_run=False, min_age_seconds=0, now=later)
    assert deleted.deleted == 4
    assert not any(_local_file(root, a).exists() for a in deleted.garbage)
    assert all(_local_file(root, a).exists() for a in keep.values())
    with server.client() as c:
        for path in ("a", "c"):
            r = c.get(f"/repositories/{repo}/refs/main/objects", params={"path": path})
            assert r.status_code == 200
        assert c.get(f"/repositories/{repo}/refs/dev/objects",
                     params={"path": "d"}).content == b"dev-only"


@pytest.mark.spark
def test_gc_refuses_a_read_only_repository(spark: SparkSession, server: LiveServer) -> None:
    with server.client() as c:
        r = c.post("/repositories", json={"name": "gc-ro", "storage_namespace": "local://gc-ro",
                                          "read_only": True})
        assert r.status_code == 201, r.text
    opts = lakefs_options(server, "gc-ro")
    gc = GarbageCollector(spark, ServerOptions.from_options(opts),
                          StorageOptions.from_options(opts))
    with pytest.raises(ReadOnlyRepositoryError, match="read-only"):
        gc.run("gc-ro", dry_run=False, min_age_seconds=0)


def _dated_commit(server: LiveServer, repo: str, date: int) -> str:
    with server.client() as c:
        r = c.post(f"/repositories/{repo}/branches/main/commits",
                   json={"message": "dated", "date": date})
        assert r.status_code == 201, r.text
        return str(r.json()["id"])


def test_rules_set_through_the_api_decide_what_gc_deletes(
        spark: SparkSession, server: LiveServer, capsys: pytest.CaptureFixture[str]) -> None:
    repo = "gc-rules"
    create_repo(server, repo)
    opts = lakefs_options(server, repo)
    root = opts["blockstore_root"]
    now = int(time.time())
    upload(server, repo, "main", "a", b"a-v1")
    c1 = _dated_commit(server, repo, now - 10 * DAY)
    old = _address(server, repo, c1, "a")
    upload(server, repo, "main", "a", b"a-v2")  # c2 replaced c1 five days ago
    _dated_commit(server, repo, now - 5 * DAY)
    gc = GarbageCollector(spark, ServerOptions.from_options(opts),
                          StorageOptions.from_options(opts))
    rules_url = f"/repositories/{repo}/settings/gc_rules"

    def set_rules(main_days: int) -> None:
        with server.client() as c:
            r = c.put(rules_url, json={"default_retention_days": 0,
                                       "branches": [{"branch_id": "main",
                                                     "retention_days": main_days}]})
            assert r.status_code == 204, r.text

    # no rules: 21 days everywhere, so c1 (replaced 5 days ago) is kept
    assert gc.run(repo, min_age_seconds=0).garbage == []
    set_rules(7)
    report = gc.run(repo, min_age_seconds=0)
    assert report.garbage == [] and c1 in report.retained_commits
    set_rules(3)
    report = gc.run(repo, min_age_seconds=0)
    assert report.garbage == [old] and c1 in report.expired_commits
    # each run had the server write its commits CSV, as lakeFS's prepare_commits does
    runs = list((_local_file(root, f"local://{repo}/_lakefs/retention/gc/commits")).iterdir())
    assert len(runs) == 2 and all((r / "commits.csv").exists() for r in runs)
    # the command line takes the repository's rules too
    argv = [f"--option={k}={v}" for k, v in opts.items()]
    assert gc_main([*argv, repo, "--min-age-hours=0", "--delete"], spark=spark) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["garbage"] == [old] and printed["deleted"] == 1
    assert not _local_file(root, old).exists()
    with server.client() as c:
        assert c.get(f"/repositories/{repo}/refs/main/objects",
                     params={"path": "a"}).content == b"a-v2"
        assert c.delete(rules_url).status_code == 204
