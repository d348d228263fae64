"""``lakectl branch-protect add|list|delete`` against a real server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from lakectl import lakectl
from lakefs_testing.live_server import LiveServer, live_server
from tests.lakectl.test_live import DEATH, api, environment, fails, ok


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("lakectl-protect"))) as srv:
        yield srv


@pytest.fixture
def cli(server: LiveServer, tmp_path: Path) -> CliRunner:
    return CliRunner(env=environment(server, tmp_path))


def test_add_list_delete(cli: CliRunner, server: LiveServer) -> None:
    ok(cli, "repo", "create", "lakefs://guarded", "local://guarded")
    assert ok(cli, "branch-protect", "list", "lakefs://guarded").stdout == ""
    assert ok(cli, "branch-protect", "add", "lakefs://guarded", "main").stdout == (
        "Branch protection rule added to 'guarded' repository.\n")
    ok(cli, "branch-protect", "add", "lakefs://guarded", "release-*")
    assert ok(cli, "branch-protect", "list", "lakefs://guarded").stdout == "main\nrelease-*\n"
    assert api(server, "GET", "/repositories/guarded/settings/branch_protection").json() == [
        {"pattern": "main"}, {"pattern": "release-*"}]
    listed = ok(cli, "branch-protect", "list", "lakefs://guarded", "-o", "json").stdout
    assert '"pattern": "release-*"' in listed

    assert ok(cli, "branch-protect", "delete", "lakefs://guarded", "main").stdout == (
        "Branch protection rule deleted from 'guarded' repository.\n")
    assert ok(cli, "branch-protect", "list", "lakefs://guarded").stdout == "release-*\n"


def test_a_protected_branch_takes_merges_only(cli: CliRunner) -> None:
    ok(cli, "repo", "create", "lakefs://merges-only", "local://merges-only")
    ok(cli, "branch", "create", "lakefs://merges-only/dev", "-s", "lakefs://merges-only/main")
    ok(cli, "branch-protect", "add", "lakefs://merges-only", "main")

    refused = fails(cli, "commit", "lakefs://merges-only/main", "-m", "direct",
                    "--allow-empty-commit")
    assert refused.stderr == f"cannot commit to protected branch\n{DEATH}\n"
    written = fails(cli, "fs", "upload", "lakefs://merges-only/main/f.txt", "-s", "-",
                    "--no-progress")
    assert "cannot write to protected branch" in written.stderr

    ok(cli, "fs", "upload", "lakefs://merges-only/dev/f.txt", "-s", "-", "--no-progress",
       input=b"through a merge\n")
    ok(cli, "commit", "lakefs://merges-only/dev", "-m", "on dev")
    assert 'Merged "dev" into "main"' in ok(
        cli, "merge", "lakefs://merges-only/dev", "lakefs://merges-only/main").stdout
    assert ok(cli, "fs", "cat", "lakefs://merges-only/main/f.txt").stdout == "through a merge\n"

    ok(cli, "branch-protect", "delete", "lakefs://merges-only", "main")
    ok(cli, "commit", "lakefs://merges-only/main", "-m", "direct again", "--allow-empty-commit")


def test_an_existing_pattern_or_a_missing_one_is_an_error(cli: CliRunner,
                                                          server: LiveServer) -> None:
    ok(cli, "repo", "create", "lakefs://rules", "local://rules")
    ok(cli, "branch-protect", "add", "lakefs://rules", "stable_*")
    again = fails(cli, "branch-protect", "add", "lakefs://rules", "stable_*")
    assert again.stderr == f"branch protection rule already exists: not unique\n{DEATH}\n"
    assert again.stdout == ""
    missing = fails(cli, "branch-protect", "delete", "lakefs://rules", "main")
    assert missing.stderr == f"branch protection rule does not exist: not found\n{DEATH}\n"
    assert ok(cli, "branch-protect", "list", "lakefs://rules").stdout == "stable_*\n"

    assert "not found" in fails(cli, "branch-protect", "list", "lakefs://no-such-repo").stderr
    assert fails(cli, "branch-protect", "list", "lakefs://rules/main").stderr == (
        f"repository not a valid repo uri\n{DEATH}\n")
    usage = cli.invoke(lakectl, ["branch-protect", "add", "lakefs://rules"])
    assert usage.exit_code == 1 and "Missing argument '<pattern>'" in usage.stderr
