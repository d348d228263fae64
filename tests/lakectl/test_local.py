"""``lakectl local``: a directory tracking a lakeFS path, cloned, changed and committed
locally, pulling the changes made on the server, and checked out at another ref."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from lakefs_testing.live_server import LiveServer, live_server
from tests.lakectl.test_live import api, environment, fails, ok


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("lakectl-local"))) as srv:
        yield srv


@pytest.fixture
def cli(server: LiveServer, tmp_path: Path) -> CliRunner:
    return CliRunner(env=environment(server, tmp_path))


def head(server: LiveServer, branch: str) -> str:
    return str(api(server, "GET", f"/repositories/synced/branches/{branch}").json()[
        "commit_id"])


def status_rows(cli: CliRunner, directory: Path) -> list[list[str]]:
    out = ok(cli, "local", "status", str(directory)).stdout
    return [line.split("\t") for line in out.splitlines() if "\t" in line]


def test_clone_commit_pull_and_checkout(cli: CliRunner, server: LiveServer,
                                        tmp_path: Path) -> None:
    ok(cli, "repo", "create", "lakefs://synced", "local://synced")
    for path, data in (("data/a.csv", "a\n"), ("data/sub/b.csv", "b\n"), ("other/x", "x")):
        ok(cli, "fs", "upload", f"lakefs://synced/main/{path}", "-s", "-", "--no-progress",
           input=data)
    ok(cli, "commit", "lakefs://synced/main", "-m", "seed")
    seed = head(server, "main")

    work = tmp_path / "work"
    out = ok(cli, "local", "clone", "lakefs://synced/main/data/", str(work),
             "--no-progress").stdout
    assert f"Successfully cloned lakefs://synced/main/data/ to {work}." in out
    assert out.endswith("Clone Summary:\n\nDownloaded: 2\n")
    assert (work / "a.csv").read_text() == "a\n" and (work / "sub" / "b.csv").read_text() == (
        "b\n")
    assert not (work / "x").exists()
    assert yaml.safe_load((work / ".lakefs_ref.yaml").read_text()) == {
        "src": "lakefs://synced/main/data/", "at_head": seed}
    assert ok(cli, "local", "status", str(work)).stdout == "\nNo diff found.\n"
    assert "not empty" in fails(cli, "local", "clone", "lakefs://synced/main/data/",
                                str(work)).stderr
    listed = ok(cli, "local", "list", str(tmp_path)).stdout
    assert listed == f"work\tlakefs://synced/main/data/\t{seed}\t{seed}\n"

    # local changes: one added, one modified, one removed
    (work / "new.csv").write_text("new\n")
    (work / "a.csv").write_text("a changed\n")
    (work / "sub" / "b.csv").unlink()
    assert status_rows(cli, work) == [["local", "modified", "a.csv"],
                                      ["local", "added", "new.csv"],
                                      ["local", "removed", "sub/b.csv"]]
    out = ok(cli, "local", "commit", str(work), "-m", "local edits", "--no-progress").stdout
    committed = head(server, "main")
    assert committed != seed and f"ID: {committed}\n" in out
    assert "Message: local edits\n" in out
    assert ok(cli, "fs", "cat", "lakefs://synced/main/data/a.csv").stdout == "a changed\n"
    assert ok(cli, "fs", "cat", "lakefs://synced/main/data/new.csv").stdout == "new\n"
    assert "data/sub/b.csv" not in ok(cli, "fs", "ls", "-r", "lakefs://synced/main/").stdout
    assert ok(cli, "fs", "cat", "lakefs://synced/main/other/x").stdout == "x"
    assert yaml.safe_load((work / ".lakefs_ref.yaml").read_text())["at_head"] == committed
    assert ok(cli, "local", "status", str(work)).stdout == "\nNo diff found.\n"

    # a change on the server: status shows it, commit refuses, pull brings it
    ok(cli, "fs", "upload", "lakefs://synced/main/data/remote.csv", "-s", "-",
       "--no-progress", input="from the server\n")
    ok(cli, "fs", "rm", "lakefs://synced/main/data/new.csv")
    ok(cli, "commit", "lakefs://synced/main", "-m", "remote edits")
    assert status_rows(cli, work) == [["remote", "removed", "new.csv"],
                                      ["remote", "added", "remote.csv"]]
    (work / "a.csv").write_text("again\n")
    assert "run 'lakectl local pull' first" in fails(cli, "local", "commit", str(work),
                                                     "-m", "behind").stderr
    out = ok(cli, "local", "pull", str(work), "--no-progress").stdout
    assert "Downloaded: 1\nRemoved: 1" in out
    assert (work / "remote.csv").read_text() == "from the server\n"
    assert not (work / "new.csv").exists()
    assert (work / "a.csv").read_text() == "again\n"  # the local change stays
    assert status_rows(cli, work) == [["local", "modified", "a.csv"]]
    ok(cli, "local", "commit", str(work), "-m", "after pull", "--no-progress")
    assert ok(cli, "fs", "cat", "lakefs://synced/main/data/a.csv").stdout == "again\n"

    # a conflicting change is refused unless forced
    ok(cli, "fs", "upload", "lakefs://synced/main/data/a.csv", "-s", "-", "--no-progress",
       input="theirs\n")
    ok(cli, "commit", "lakefs://synced/main", "-m", "theirs")
    (work / "a.csv").write_text("mine\n")
    assert "conflict" in fails(cli, "local", "pull", str(work)).stderr
    ok(cli, "local", "pull", str(work), "--force", "--no-progress")
    assert (work / "a.csv").read_text() == "theirs\n"

    # checkout another ref: the directory becomes that ref's content
    ok(cli, "local", "checkout", str(work), "--ref", seed, "-y", "--no-progress")
    files = sorted(p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file())
    assert files == [".lakefs_ref.yaml", "a.csv", "sub/b.csv"]
    assert (work / "a.csv").read_text() == "a\n"
    assert yaml.safe_load((work / ".lakefs_ref.yaml").read_text()) == {
        "src": f"lakefs://synced/{seed}/data/", "at_head": seed}
    assert "Checkout aborted" in fails(cli, "local", "checkout", str(work)).stderr
    os.remove(work / ".lakefs_ref.yaml")
    assert "not linked to a lakeFS path" in fails(cli, "local", "status", str(work)).stderr


def test_init_links_an_existing_directory(cli: CliRunner, server: LiveServer,
                                          tmp_path: Path) -> None:
    ok(cli, "repo", "create", "lakefs://linked", "local://linked")
    directory = tmp_path / "d"
    directory.mkdir()
    (directory / "f.txt").write_text("f")
    out = ok(cli, "local", "init", "lakefs://linked/main/in", str(directory)).stdout
    assert out == f"Successfully linked local directory '{directory}' with remote " \
                  "'lakefs://linked/main/in/'\n"
    assert "already linked" in fails(cli, "local", "init", "lakefs://linked/main/in",
                                     str(directory)).stderr
    assert status_rows(cli, directory) == [["local", "added", "f.txt"]]
    ok(cli, "local", "commit", str(directory), "-m", "first", "--no-progress")
    assert ok(cli, "fs", "cat", "lakefs://linked/main/in/f.txt").stdout == "f"
