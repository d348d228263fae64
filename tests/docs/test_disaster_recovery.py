"""Every command of docs/DISASTER_RECOVERY.md runs, in the page's order, against two live
regions: lakectl lines through lakectl itself, curl lines through curl.

The page's ``<!-- runbook: ... -->`` comments mark what happens to the regions
between its steps (the source region lost, with a commit the mirror never received;
the source region back); placeholders such as ``<mirror id>`` are filled from the
regions' state when the line runs.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from lakectl import lakectl
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET
from lakefs_testing.regions import (
    MIRRORS,
    Region,
    commit,
    create_source,
    mirror_head,
    two_regions,
    upload,
)
from lakefs_testing.servers import free_port
from lakefs_testing.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "DISASTER_RECOVERY.md"
PIECE = re.compile(r"^```sh\n(.*?)^```|<!-- runbook: (.*?) -->", re.M | re.S)
EAST, WEST = "http://127.0.0.1:8000", "http://127.0.0.1:8001"
REGION_MIRRORS = "/service/replication/v1/mirrors"
GROUPS = "/service/replication/v1/groups"
PIPELINE = ("features", "labels")


def runbook() -> list[tuple[str, str]]:
    """The page's steps in order: ("sh", a command line) and ("event", what happens)."""
    steps: list[tuple[str, str]] = []
    for block, event in PIECE.findall(PAGE.read_text(encoding="utf-8")):
        if event:
            steps.append(("event", event))
            continue
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" # ")[0].strip()
            if line and not line.startswith("#"):
                steps.append(("sh", line))
    return steps


class Drill:
    """Runs the page's steps against ``east`` (the source) and ``west`` (its mirror)."""

    def __init__(self, east: Region, west: Region, home: Path) -> None:
        self.east, self.west, self.home = east, west, home
        self.env = {"HOME": str(home), "LAKECTL_INTERACTIVE": "false",
                    "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": ADMIN_KEY,
                    "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": ADMIN_SECRET}
        self.ran: list[str] = []
        self.missed: list[str] = []  # commits of east that west never received
        self._east_endpoint = ""

    def _endpoint(self, url: str) -> str:
        return url.replace(EAST, self.east.server.endpoint).replace(
            WEST, self.west.server.endpoint)

    def _region(self) -> Region:
        return self.east if self.env.get("LAKECTL_SERVER_ENDPOINT_URL") == \
            self.east.server.endpoint else self.west

    def _mirrors(self) -> list[dict[str, Any]]:
        with self.west.client() as c:
            r = c.get(REGION_MIRRORS, params={"amount": 1000})
            assert r.status_code == 200, r.text
            return [m for m in r.json()["results"] if m["state"] not in ("deleting", "deleted")]

    def _mirror_into(self, region: str, repository: str = "sales") -> str:
        return max(m["id"] for m in self._mirrors()
                   if m["region"] == region and m["name"] == repository)

    def _group_into(self, region: str) -> str:
        with self.west.client() as c:
            r = c.get(GROUPS)
            assert r.status_code == 200, r.text
            return str(next(g["id"] for g in r.json()["results"] if g["region"] == region))

    def fill(self, line: str) -> str:
        values = {
            "<key id>": ADMIN_KEY, "<secret>": ADMIN_SECRET,
            "<commit id>": lambda: mirror_head(self.west, "sales", "main"),
            "<mirror id>": lambda: self._mirror_into("west"),
            "<reverse mirror id>": lambda: self._mirror_into("east"),
            "<features mirror id>": lambda: self._mirror_into("west", "features"),
            "<labels mirror id>": lambda: self._mirror_into("west", "labels"),
            "<group id>": lambda: self._group_into("west"),
            "<reverse group id>": lambda: self._group_into("east"),
            "<failover branch>": lambda: next(
                b.name for b in self.west.graveler.list_branches("sales", amount=1000)
                if b.name.startswith("failover-") and b.name.endswith("-main")),
        }
        for key, value in values.items():
            if key in line:
                line = line.replace(key, str(value() if callable(value) else value))
        assert "<" not in line, f"a placeholder the drill cannot fill: {line}"
        return line

    def run(self, line: str) -> str:
        words = shlex.split(self.fill(line))
        self.ran.append(line)
        if words[0] == "export":
            key, _, value = words[1].partition("=")
            self.env[key] = self._endpoint(value)
            return ""
        if words[0] == "curl":
            out = subprocess.run([self._endpoint(w) for w in words], capture_output=True,
                                 text=True, timeout=60, check=False)
            assert out.returncode == 0, (line, out.stderr)
            assert json.loads(out.stdout), line  # an answer, not an error page
            return out.stdout
        assert words[0] == "lakectl", line
        result = CliRunner(env=self.env).invoke(lakectl, words[1:])
        assert result.exit_code == 0, (line, result.output, result.exception)
        return result.stdout

    # -- what happens between the steps ------------------------------------------------
    def event(self, what: str) -> None:
        self.ran.append(f"<!-- {what} -->")
        if what.startswith("east is lost during the pipeline"):
            self._lose_east(PIPELINE)
        elif what.startswith("east is lost"):
            self._lose_east(("sales",))
        elif what.startswith("east returns"):
            self._east_returns()
        else:
            raise AssertionError(f"an event the drill does not know: {what}")

    def _lose_east(self, repositories: tuple[str, ...]) -> None:
        west = self.west
        west.stop_sidecars()  # west is not listening when east's last commits are made
        for repo in repositories:
            upload(self.east, repo, "main", "docs/late.csv", b"east only\n")
            self.missed.append(commit(self.east, repo, "main", "the last commit of east"))
        self.east.stop_sidecars()
        config = yaml.safe_load(west.config_path.read_text())
        self._east_endpoint = config["dst_endpoints"]["east"]
        config["dst_endpoints"]["east"] = f"http://127.0.0.1:{free_port()}"  # nothing there
        west.config_path.write_text(yaml.safe_dump(config))
        west.start_sidecar()

    def _east_returns(self) -> None:
        west = self.west
        west.stop_sidecars()
        config = yaml.safe_load(west.config_path.read_text())
        config["dst_endpoints"]["east"] = self._east_endpoint
        west.config_path.write_text(yaml.safe_dump(config))
        west.start_sidecar()
        self.east.start_sidecar()


def test_every_step_of_the_runbook_runs(tmp_path: Path, monkeypatch: Any) -> None:
    steps = runbook()
    assert ("event", "east returns") in steps and len(steps) > 20
    monkeypatch.chdir(tmp_path)
    (tmp_path / "report.csv").write_text("region,rows\nwest,1\n")
    for repo in PIPELINE:
        (tmp_path / f"{repo}.csv").write_text(f"day,{repo}\n1,0.5\n")
    mirrors_db = {"type": "sqlite", "sqlite": {"path": str(tmp_path / "mirrors.db")}}
    with two_regions(tmp_path / "regions", mirrors_db, interval="1s") as (east, west):
        # the quickstart's state: sales in east, its mirror in west under the same name
        create_source(east, "sales")
        upload(east, "sales", "main", "docs/README.md", b"# sales\n")
        first = commit(east, "sales", "main", "first load")
        with east.client() as c:
            r = c.post(f"{MIRRORS}/sales/mirrors",
                       json={"region": "west", "storage_namespace": "local://sales"})
            assert r.status_code == 201, r.text
        wait_for(lambda: mirror_head(west, "sales", "main") == first, 30, what="in sync")

        drill = Drill(east, west, tmp_path)
        outputs: dict[str, str] = {}
        for kind, text in steps:
            if kind == "event":
                drill.event(text)
            else:
                outputs[text] = drill.run(text)

        # what the page's steps did: the commit east made alone was kept, merged into
        # west's main, and came back to east with the primary; nothing was renamed
        assert drill.missed
        kept = outputs["lakectl mirror failback lakefs://sales <mirror id> -y"]
        assert "Commits of the old source kept here:" in kept and drill.missed[0][:12] in kept
        assert "is the primary" in outputs["lakectl mirror switchover lakefs://sales "
                                           "<reverse mirror id> -y"]
        assert not east.graveler.get_repository("sales").read_only
        wait_for(lambda: mirror_head(west, "sales", "main")
                 == east.graveler.get_branch("sales", "main").commit_id, 30,
                 what="west follows east again")
        with west.client() as c:
            for path, data in (("docs/late.csv", b"east only\n"),
                               ("reports/report.csv", b"region,rows\nwest,1\n")):
                r = c.get("/api/v1/repositories/sales/refs/main/objects", params={"path": path})
                assert r.status_code == 200 and r.content == data, (path, r.text)

        # the group's steps: east's last run, lost in the failover, was kept in west on
        # failover branches, came back to east with the primary, and west follows east
        lost = dict(zip(PIPELINE, drill.missed[1:], strict=True))
        assert "Switched over at cut" in outputs["lakectl mirror group switchover "
                                                 "<reverse group id> -y"]
        for repo in PIPELINE:
            assert not east.graveler.get_repository(repo).read_only
            assert west.graveler.get_repository(repo).read_only
            kept = [b for b in east.graveler.list_branches(repo, amount=1000)
                    if b.name.startswith("failover-")]
            assert [b.commit_id for b in kept] == [lost[repo]], kept
            wait_for(lambda repo=repo: mirror_head(west, repo, "main")
                     == east.graveler.get_branch(repo, "main").commit_id, 30,
                     what=f"west follows east's {repo}")
