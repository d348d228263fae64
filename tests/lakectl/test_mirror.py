"""``lakectl mirror`` against two regions: create, follow, detach, delete."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from lakectl import lakectl
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET
from lakefs_testing.regions import Region, two_regions
from lakefs_testing.waiting import wait_for


def runner(region: Region, home: Path) -> CliRunner:
    return CliRunner(env={"HOME": str(home), "LAKECTL_INTERACTIVE": "false",
                          "LAKECTL_SERVER_ENDPOINT_URL": region.server.endpoint,
                          "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": ADMIN_KEY,
                          "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": ADMIN_SECRET})


def ok(cli: CliRunner, *args: str, input: bytes | None = None) -> Result:
    result = cli.invoke(lakectl, list(args), input=input)
    assert result.exit_code == 0, (args, result.stdout, result.stderr, result.exception)
    return result


def test_mirror_commands_across_two_regions(tmp_path: Path) -> None:
    mirrors_db: dict[str, Any] = {"type": "sqlite",
                                  "sqlite": {"path": str(tmp_path / "mirrors.db")}}
    with two_regions(tmp_path, mirrors_db, interval="1s") as (east, west):
        e, w = runner(east, tmp_path), runner(west, tmp_path)
        ok(e, "repo", "create", "lakefs://src", "local://src")
        ok(e, "fs", "upload", "lakefs://src/main/a.txt", "-s", "-", "--no-progress",
           input=b"replicated")
        head = json.loads(ok(e, "commit", "lakefs://src/main", "-m", "data",
                             "-o", "json").stdout)["id"]

        created = ok(e, "mirror", "create", "lakefs://src", "--name", "src-mirror",
                     "--region", "west", "--storage-namespace", "local://src-mirror")
        mirror_id = created.stdout.split("'")[1]
        assert f"ID: {mirror_id}\nName: src-mirror\n" in created.stdout
        # west has one store: a storage id names none of it
        refused = e.invoke(lakectl, ["mirror", "create", "lakefs://src", "--name", "other",
                                     "--region", "west", "--storage-namespace",
                                     "local://other", "--storage-id", "second"])
        assert refused.exit_code != 0
        assert ("storage_id 'second': region 'west' has no such blockstore (it has a single "
                "blockstore: leave storage_id unset)") in refused.output
        row = ok(e, "mirror", "list", "lakefs://src").stdout.splitlines()[0].split("\t")
        assert row[:4] == [mirror_id, "src-mirror", "east/src", "west"]

        def caught_up() -> bool:
            st = json.loads(ok(w, "mirror", "status", "lakefs://src", mirror_id,
                               "-o", "json").stdout)
            return st["mirror"]["state"] == "active" and any(
                b["branch"] == "main" and b["mirror_head"] == head for b in st["branches"])

        wait_for(caught_up, timeout=60, interval=0.5, what="the mirror to catch up")
        status = ok(e, "mirror", "status", "lakefs://src", mirror_id).stdout
        assert "State: active\n" in status and f"main\t{head}\t{head}\t" in status
        assert ok(w, "fs", "cat", "lakefs://src-mirror/main/a.txt").stdout == "replicated"

        # failover: the destination region detaches; the repository is its users' now
        detached = ok(w, "mirror", "detach", "lakefs://src", mirror_id, "-y").stdout
        assert detached == f"Mirror '{mirror_id}' detached: repository 'src-mirror' is writable\n"
        ok(w, "fs", "upload", "lakefs://src-mirror/main/b.txt", "-s", "-", "--no-progress",
           input=b"after failover")
        ok(e, "mirror", "delete", "lakefs://src", mirror_id, "-y")
        states = json.loads(ok(e, "mirror", "list", "lakefs://src", "-o", "json").stdout)
        assert [m["state"] for m in states["results"] if m["id"] == mirror_id] in (
            ["deleting"], ["deleted"])
