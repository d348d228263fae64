"""What a mirror group's status, metrics, lakectl and web UI say (design I6, I8): the cut
served, its source time, what the next cut waits for, and the group's honest lag, never
current while its source region does not read the member heads."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import httpx

from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET
from lakefs_testing.regions import MIRRORS, Region, two_regions
from lakefs_testing.ui_login import ui_sign_in
from lakefs_testing.waiting import wait_for
from tests.lakectl.test_mirror import ok, runner
from tests.replication.test_groups import REPOS, group_status, heads_of
from tests.replication.test_groups_handover import Pipeline, start_pipeline
from tests.replication.test_metrics_logs import scrape


def _group_metric(region: Region, name: str) -> float | None:
    return scrape(region).get((name, (("group", "pipeline"),)))


def _mirror_status(region: Region, repo: str, mirror_id: str) -> dict[str, Any]:
    with region.client() as c:
        r = c.get(f"{MIRRORS}/{repo}/mirrors/{mirror_id}/status")
        assert r.status_code == 200, r.text
        return dict(r.json())


def _ui_mirrors_page(region: Region, repo: str) -> str:
    with httpx.Client(base_url=region.server.endpoint, timeout=60) as c:
        r = ui_sign_in(c, ADMIN_KEY, ADMIN_SECRET)
        assert r.status_code == 303, r.text
        page = c.get(f"/ui/repositories/{repo}/mirrors")
        assert page.status_code == 200, page.text
        return page.text


def _current(p: Pipeline) -> dict[str, Any]:
    return dict(wait_for(lambda: (st := group_status(p.west, p.group_id))["current"] and st,
                         30, what="the group is current"))


def test_a_group_whose_source_is_not_read_is_stale_and_its_lag_covers_the_missed_run(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1s") as (east, west):
        p = start_pipeline(east, west)
        served = _current(p)
        cut = served["served_cut"]
        assert heads_of(cut) == {p.mirrors[r]: p.served(west)[r] for r in REPOS}
        assert served["lag_seconds"] < served["stale_after_seconds"]
        assert {m["state"] for m in served["members"]} == {"active"}

        # each member mirror's status shows its grouped branch as the group's
        for repo in REPOS:
            st = _mirror_status(west, repo, p.mirrors[repo])
            main = next(b for b in st["branches"] if b["branch"] == "main")
            assert main["group"]["id"] == p.group_id and main["current"]
            assert main["mirror_head"] == p.served(west)[repo] and not st["stale"]
        table = ok(runner(west, tmp_path), "mirror", "status", "lakefs://features",
                   p.mirrors["features"]).stdout
        assert f"moved by group pipeline (cut {cut['sequence']})" in table
        metrics = scrape(west)
        assert metrics[("replication_group_served_cut", (("group", "pipeline"),))] == \
            cut["sequence"]
        assert metrics[("replication_group_source_unread", (("group", "pipeline"),))] == 0

        # the source region's replication service goes away; the pipeline runs on there
        east.stop_sidecars()
        missed = p.write(east, "never cut")
        missed_at = time.time()

        def stale() -> dict[str, Any] | None:
            st = group_status(west, p.group_id)
            return st if st["stale"] else None

        st = wait_for(stale, 60, what="the group to be stale")
        assert st["current"] is False and st["waiting"] is None
        assert heads_of(st["served_cut"]) == heads_of(cut)  # still the cut before
        assert st["lag_seconds"] >= time.time() - missed_at
        assert p.served(west) != missed
        time.sleep(1.1)  # and still growing
        assert group_status(west, p.group_id)["lag_seconds"] > st["lag_seconds"]
        unread = _group_metric(west, "replication_group_source_unread")
        lag = _group_metric(west, "replication_group_lag_seconds")
        assert unread == 1 and lag is not None and lag >= time.time() - missed_at
        for repo in REPOS:
            member = _mirror_status(west, repo, p.mirrors[repo])
            assert member["stale"] and member["lag_seconds"] >= st["lag_seconds"]

        out = ok(runner(west, tmp_path), "mirror", "group", "status", p.group_id).stdout
        assert "Stale: the source did not read the member heads" in out
        assert f"Served Cut: {cut['sequence']}" in out
        listed = json.loads(ok(runner(west, tmp_path), "mirror", "list", "-o", "json").stdout)
        rows = {m["id"]: m for m in listed["results"]}
        assert all(rows[p.mirrors[r]]["branches"][0]["stale"] for r in REPOS)

        html = _ui_mirrors_page(west, "labels")
        card = html[html.index('data-test="mirror-group"'):]
        badge = re.search(r'<span class="badge stale" data-test="group-stale"[^>]*>', card)
        assert badge is not None and "hidden" not in badge.group(0), card
        assert f"cut {cut['sequence']}</b>" in card and "blind · " in card
        assert 'data-test="detach-group"' in card  # the members' repositories are here
