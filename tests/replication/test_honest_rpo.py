"""The honest RPO (design I6): a mirror whose source cannot be read is never shown
current, and its lag covers every commit it may have missed, in the API, the metrics,
lakectl and the web UI. The sequence is the one that once showed a false zero: stop
the destination's sidecar, commit in the source, lose the source region, start the
destination's sidecar again."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import yaml
from click.testing import CliRunner

from lakectl import lakectl
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET
from lakefs_testing.regions import (
    MIRRORS,
    Region,
    commit,
    create_mirror,
    create_source,
    mirror_head,
    two_regions,
    upload,
)
from lakefs_testing.servers import free_port, start_moto
from lakefs_testing.ui_login import ui_sign_in
from lakefs_testing.waiting import wait_for
from tests.replication.test_metrics_logs import branch_metric, mirror_metric, scrape


def _status(region: Region, mirror_id: str) -> dict[str, Any]:
    with region.client() as c:
        r = c.get(f"{MIRRORS}/src/mirrors/{mirror_id}/status")
        assert r.status_code == 200, r.text
        return dict(r.json())


def _main(status: dict[str, Any]) -> dict[str, Any]:
    return next(b for b in status["branches"] if b["branch"] == "main")


def _lose_source_region(east: Region, west: Region) -> None:
    """East's services are gone: its sidecars stop, and west's sidecar finds nothing at
    east's address any more."""
    east.stop_sidecars()
    config = yaml.safe_load(west.config_path.read_text())
    config["dst_endpoints"]["east"] = f"http://127.0.0.1:{free_port()}"
    west.config_path.write_text(yaml.safe_dump(config))


def _ui_mirrors_page(west: Region) -> str:
    with httpx.Client(base_url=west.server.endpoint, timeout=60) as c:
        r = ui_sign_in(c, ADMIN_KEY, ADMIN_SECRET)
        assert r.status_code == 303, r.text
        page = c.get("/ui/repositories/src-mirror/mirrors")
        assert page.status_code == 200, page.text
        return page.text


def test_a_blind_mirror_is_stale_and_its_lag_covers_the_missed_commit(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1s") as (east, west):
        create_source(east)
        upload(east, "src", "main", "a", b"1")
        c1 = commit(east, "src", "main", "c1")
        mirror = create_mirror(east)
        wait_for(lambda: mirror_head(west, "src-mirror", "main") == c1
                 and _main(_status(east, mirror["id"]))["current"], 30, what="current")
        before = _status(west, mirror["id"])
        assert not before["stale"] and _main(before)["lag_seconds"] < 5

        west.stop_sidecars()
        upload(east, "src", "main", "b", b"2")
        commit(east, "src", "main", "c2: never reaches the mirror")
        missed_at = time.time()
        _lose_source_region(east, west)
        time.sleep(1.5)  # the commit ages: the lag must count it
        west.start_sidecar()

        # the first round after the restart finds the source unreadable
        def blind() -> dict[str, Any] | None:
            st = _status(west, mirror["id"])
            return st if st["stale"] and st["error"].startswith("source unreadable") else None

        st = wait_for(blind, 30, what="the status to say the source is not read")
        main = _main(st)
        assert main["mirror_head"] == c1 and not main["current"] and main["stale"]
        assert main["lag_seconds"] >= time.time() - missed_at
        assert st["lag_seconds"] >= main["lag_seconds"]
        # the stored confirmation is from before the commit the mirror missed
        assert main["source_confirmed_at"] <= missed_at
        # still growing while blind
        time.sleep(1.1)
        assert _main(_status(west, mirror["id"]))["lag_seconds"] > main["lag_seconds"]

        # the metrics of the restarted sidecar say the same
        metrics = scrape(west)
        assert mirror_metric(metrics, "replication_mirror_source_unreadable", "src-mirror") == 1
        lag = branch_metric(metrics, "replication_mirror_branch_lag_seconds", "src-mirror")
        assert lag is not None and lag >= time.time() - missed_at

        # lakectl, from the surviving region, without the source region
        cli = CliRunner(env={"HOME": str(tmp_path), "LAKECTL_INTERACTIVE": "false",
                             "LAKECTL_SERVER_ENDPOINT_URL": west.server.endpoint,
                             "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": ADMIN_KEY,
                             "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": ADMIN_SECRET})
        listed = cli.invoke(lakectl, ["mirror", "list", "-o", "json"])
        assert listed.exit_code == 0, listed.output
        row = next(m for m in json.loads(listed.stdout)["results"] if m["id"] == mirror["id"])
        assert row["state"] == "active" and row["branches"][0]["stale"]
        table = cli.invoke(lakectl, ["mirror", "list"])
        assert f"{mirror['id']}\tsrc-mirror\teast/src\twest\tactive\t0/1 (source not read)\t" \
            in table.stdout, table.stdout
        status = cli.invoke(lakectl, ["mirror", "status", "lakefs://src-mirror", mirror["id"]])
        assert status.exit_code == 0, status.output
        assert "Stale: the source was not read" in status.stdout
        assert f"main\t{main['source_head']}\t{c1}\tstale\t" in status.stdout

        # the web UI of the surviving region: no branch current, the stale badge shown
        html = _ui_mirrors_page(west)
        assert "0/1 branches current" in html
        badge = re.search(r'<span class="badge stale" data-test="mirror-stale"[^>]*>', html)
        assert badge is not None and "hidden" not in badge.group(0), html
        assert 'class="stale" data-branch="main"' in html


def test_a_mirrors_table_out_of_reach_answers_503_saying_so(tmp_path: Path) -> None:
    """The mirrors table (DynamoDB) goes away: the status and listing routes answer 503
    naming the table, for the client to try again; never a 500."""
    server = start_moto()
    table = {"type": "dynamodb", "dynamodb": {
        "table_name": "mirrors-gone", "aws_region": "us-east-1",
        "endpoint_url": server.endpoint}}
    try:
        with two_regions(tmp_path, table, interval="1s") as (east, west):
            create_source(east)
            mirror = create_mirror(east)
            server.stop()
            for region in (east, west):
                with region.client() as c:
                    for path in (f"{MIRRORS}/src/mirrors/{mirror['id']}/status",
                                 f"{MIRRORS}/src/mirrors"):
                        r = c.get(path)
                        assert r.status_code == 503, (path, r.status_code, r.text)
                        assert "cannot reach DynamoDB table 'mirrors-gone'" in (
                            r.json()["message"])
    finally:
        server.stop()
