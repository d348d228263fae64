"""lakectl's history commands against a live server: ``branch revert``, ``cherry-pick``,
``show commit``, ``find-merge-base`` and ``tag show``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from lakefs_testing.live_server import LiveServer, live_server
from tests.lakectl.test_live import api, environment, fails, ok


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("lakectl-history"))) as srv:
        yield srv


@pytest.fixture
def cli(server: LiveServer, tmp_path: Path) -> CliRunner:
    return CliRunner(env=environment(server, tmp_path))


def head(server: LiveServer, repo: str, branch: str) -> str:
    return str(api(server, "GET", f"/repositories/{repo}/branches/{branch}").json()["commit_id"])


def put(cli: CliRunner, address: str, data: str) -> None:
    ok(cli, "fs", "upload", address, "-s", "-", "--no-progress", input=data)


def test_revert_cherry_pick_show_and_merge_base(cli: CliRunner, server: LiveServer) -> None:
    ok(cli, "repo", "create", "lakefs://hist", "local://hist")
    put(cli, "lakefs://hist/main/a", "a1")
    ok(cli, "commit", "lakefs://hist/main", "-m", "add a", "--meta", "k=v")
    base = head(server, "hist", "main")
    ok(cli, "branch", "create", "lakefs://hist/dev", "-s", "lakefs://hist/main")
    put(cli, "lakefs://hist/dev/b", "b1")
    ok(cli, "commit", "lakefs://hist/dev", "-m", "add b")
    picked = head(server, "hist", "dev")
    put(cli, "lakefs://hist/main/c", "c1")
    ok(cli, "commit", "lakefs://hist/main", "-m", "add c")
    added_c = head(server, "hist", "main")

    shown = ok(cli, "show", "commit", f"lakefs://hist/{base}").stdout
    assert f"ID:            {base}\n" in shown and "\tadd a\n" in shown
    assert "\t\tk = v" in shown and "Meta Range ID" not in shown
    with_range = ok(cli, "show", "commit", f"lakefs://hist/{base}", "--show-meta-range-id")
    assert "Meta Range ID: " in with_range.stdout
    as_json = json.loads(ok(cli, "show", "commit", f"lakefs://hist/{base}", "-o",
                            "json").stdout)
    assert as_json == api(server, "GET", f"/repositories/hist/commits/{base}").json()

    found = ok(cli, "find-merge-base", "lakefs://hist/dev", "lakefs://hist/main").stdout
    assert found == ("Source: lakefs://hist/dev\nDestination: lakefs://hist/main\n"
                     f'Found base "{base}" when merging "{picked}" into '
                     f'"{head(server, "hist", "main")}".\n')
    assert "both references must belong to the same repository" in fails(
        cli, "find-merge-base", "lakefs://hist/dev", "lakefs://other/main").stderr

    out = ok(cli, "cherry-pick", f"lakefs://hist/{picked}", "lakefs://hist/main").stdout
    new_head = head(server, "hist", "main")
    assert out.startswith('Branch: lakefs://hist/main\nCommit for branch "main" completed.\n')
    assert f"ID: {new_head}\n" in out and "Message: add b\n" in out
    assert ok(cli, "fs", "cat", "lakefs://hist/main/b").stdout == "b1"
    assert "Repository mismatch" in fails(cli, "cherry-pick", f"lakefs://other/{picked}",
                                          "lakefs://hist/main").stderr

    # no terminal, no --yes: nothing reverted
    assert "Revert aborted" in fails(cli, "branch", "revert", "lakefs://hist/main",
                                     "main").stderr
    out = ok(cli, "branch", "revert", "lakefs://hist/main", "main", added_c, "-y").stdout
    assert out == ("Branch: lakefs://hist/main\ncommit main successfully reverted\n"
                   f"commit {added_c} successfully reverted\n")
    listing = ok(cli, "fs", "ls", "lakefs://hist/main/").stdout
    assert [line.split()[-1] for line in listing.splitlines()] == ["a"]
    assert "parent number must be non-negative" in fails(
        cli, "branch", "revert", "lakefs://hist/main", "main", "-m", "0", "-y").stderr

    ok(cli, "tag", "create", "lakefs://hist/v1", f"lakefs://hist/{base}")
    assert ok(cli, "tag", "show", "lakefs://hist/v1").stdout == f"v1 {base}\n"


def test_annotate(cli: CliRunner, server: LiveServer) -> None:
    ok(cli, "repo", "create", "lakefs://blame", "local://blame")
    put(cli, "lakefs://blame/main/dir/a", "a")
    put(cli, "lakefs://blame/main/top", "t")
    ok(cli, "commit", "lakefs://blame/main", "-m", "first\nsecond line")
    first = head(server, "blame", "main")
    put(cli, "lakefs://blame/main/dir/b", "b")
    ok(cli, "commit", "lakefs://blame/main", "-m", "add b")
    second = head(server, "blame", "main")
    lines = ok(cli, "annotate", "lakefs://blame/main/").stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["dir/", "top"]
    assert lines[0].split()[1:3] == ["admin", second[:16]] and lines[0].endswith("  add b")
    assert lines[1].split()[2] == first[:16] and lines[1].endswith("  first")
    recursive = ok(cli, "blame", "-r", "lakefs://blame/main/dir/").stdout.splitlines()
    assert [(line.split()[0], line.split()[2]) for line in recursive] == [
        ("dir/a", first[:16]), ("dir/b", second[:16])]


def test_bisect(cli: CliRunner, server: LiveServer, tmp_path: Path) -> None:
    ok(cli, "repo", "create", "lakefs://search", "local://search")
    ids = []
    for i in range(8):
        put(cli, f"lakefs://search/main/f{i}", str(i))
        ok(cli, "commit", "lakefs://search/main", "-m", f"c{i}")
        ids.append(head(server, "search", "main"))
    assert fails(cli, "bisect", "log").stderr.startswith('You need to start by "bisect start"')
    out = ok(cli, "bisect", "start", "lakefs://search/main", f"lakefs://search/{ids[0]}").stdout
    # seven commits, newest first: c7 .. c1
    assert out == ("Repository: search\nBisecting: 2 commits left to test after this "
                   f"(roughly 2 steps)\nCurrent commit lakefs://search/{ids[5]} c5\n")
    assert (tmp_path / ".lakectl.bisect.json").is_file()
    ok(cli, "bisect", "bad")
    assert "Current commit lakefs://search/" in ok(cli, "bisect", "log").stdout
    assert f"ID:            {ids[3]}" in ok(cli, "bisect", "view").stdout
    assert ok(cli, "bisect", "reset").stdout == "Cleared bisect session\n"
    assert fails(cli, "bisect", "reset").stderr.startswith("No active bisect session")

    # the change came with c5: commits before it pass the check
    ok(cli, "bisect", "start", "lakefs://search/main", f"lakefs://search/{ids[0]}")
    check = ("import sys; sys.exit(0 if sys.argv[1] in "
             f"{ids[:5]!r} else 1)")
    out = ok(cli, "bisect", "run", sys.executable, "-c", check, ":BISECT_ID:").stdout
    assert out.endswith(f"Found commit lakefs://search/{ids[5]} c5\n")
    assert "-- BAD [" in out and "-- GOOD [" in out
    ok(cli, "bisect", "reset")
