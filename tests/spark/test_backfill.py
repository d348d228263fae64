"""Mirror backfill/validation as a Spark job: every range and object of a commit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakefs_core.block.local import LocalBlockStore
from lakefs_core.spark.backfill import MirrorBackfill, StoreLocation, backfill_commit
from lakefs_core.spark.backfill import main as backfill_main
from lakefs_core.spark.options import ServerOptions, StorageOptions
from lakefs_testing.live_server import LiveServer
from tests.spark.conftest import commit, create_repo, lakefs_options, upload

pytestmark = pytest.mark.spark


def test_backfill_validates_then_copies_every_object(
        spark: SparkSession, server: LiveServer, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    # small ranges, so that a commit of 60 objects spans many ranges (many tasks)
    server.services.graveler.range_options = {"raggedness": 4}
    create_repo(server, "big")
    for i in range(60):
        upload(server, "big", "main", f"obj/{i:03d}", f"object {i}".encode() * (i + 1))
    commit(server, "big", "main")
    opts = lakefs_options(server, "big")
    source = ServerOptions.from_options(opts)
    source_storage = StorageOptions.from_options(opts)
    dest_root = tmp_path / "west-store"
    dest = StoreLocation(StorageOptions(blockstore_root=str(dest_root)), "local://big-mirror")

    report = backfill_commit(spark, source, "big", "main", source_storage, dest,
                             ranges_per_task=2)
    assert report.ranges > 4
    assert report.objects_checked == 60 and report.objects_present == 0
    assert not report.complete
    kinds = {m["kind"] for m in report.missing}
    assert kinds == {"metarange", "range", "object"}
    assert report.missing_count == 60 + report.ranges + 1
    assert not dest_root.exists() or not any(dest_root.rglob("*"))  # validation only

    # the command line copies (and exits 0 once everything is there)
    argv = [*(f"--option={k}={v}" for k, v in opts.items()),
            f"--option=dest_blockstore_root={dest_root}", "big", "main", "local://big-mirror"]
    assert backfill_main([*argv, "--copy"], spark=spark) == 0
    copied = json.loads(capsys.readouterr().out)
    assert copied["complete"] is True, copied["missing"][:5]
    assert copied["objects_copied"] == 60 and copied["ranges_copied"] == copied["ranges"]

    # a damaged object (same size, other bytes) is found by its etag, and repaired
    store = LocalBlockStore(str(dest_root))
    victim = next(s for s in store.list("local://big-mirror/data/") if s.size > 100)
    original = store.get(victim.address)
    store.put(victim.address, b"X" * len(original))
    again = MirrorBackfill(spark, StoreLocation(source_storage, "local://big"), dest).run(
        copied["metarange_id"])
    assert again.missing_count == 1 and again.objects_present == 59
    assert again.missing[0]["kind"] == "object" and "etag" in again.missing[0]["reason"]
    fixed = MirrorBackfill(spark, StoreLocation(source_storage, "local://big"), dest).run(
        copied["metarange_id"], copy=True)
    assert fixed.complete and fixed.objects_copied == 1
    assert store.get(victim.address) == original
