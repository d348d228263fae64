"""lakectl's repository administration and setup commands against a live server:
``repo create-bare``, ``refs-dump``/``refs-restore``, ``gc *-config``, ``actions
validate``, ``identity``, ``usage summary``, ``config``, ``doctor``, ``completion``, and
the top-level command set."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from lakectl import lakectl
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET, LiveServer, live_server
from tests.lakectl.test_live import api, environment, fails, ok

#: lakeFS's lakectl top-level commands (``lakectl --help``), less its hidden ones
LAKEFS_COMMANDS = {
    "actions", "annotate", "auth", "bisect", "branch", "branch-protect", "cherry-pick",
    "commit", "completion", "config", "dbt", "diff", "doctor", "find-merge-base", "fs", "gc",
    "identity", "import", "ingest", "local", "log", "merge", "metastore", "plugin",
    "refs-dump", "refs-restore", "repo", "show", "tag", "usage"}
#: its hidden (plumbing) commands: not in ``--help``, there all the same
LAKEFS_HIDDEN_COMMANDS = {"abuse", "cat-hook-output", "cat-sst", "docs"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("lakectl-admin"))) as srv:
        yield srv


@pytest.fixture
def cli(server: LiveServer, tmp_path: Path) -> CliRunner:
    return CliRunner(env=environment(server, tmp_path))


def test_help_lists_lakefs_commands() -> None:
    result = CliRunner().invoke(lakectl, ["--help"])
    listed = {line.split()[0] for line in result.stdout.split("Commands:\n")[1].splitlines()}
    assert listed >= LAKEFS_COMMANDS
    assert not listed & LAKEFS_HIDDEN_COMMANDS
    for hidden in LAKEFS_HIDDEN_COMMANDS:
        assert CliRunner().invoke(lakectl, [hidden, "--help"]).exit_code == 0, hidden


def test_refs_dump_then_restore_into_a_bare_repository(cli: CliRunner, server: LiveServer,
                                                       tmp_path: Path) -> None:
    ok(cli, "repo", "create", "lakefs://dumped", "local://dumped")
    ok(cli, "fs", "upload", "lakefs://dumped/main/x", "-s", "-", "--no-progress", input="x")
    ok(cli, "commit", "lakefs://dumped/main", "-m", "x")
    ok(cli, "tag", "create", "lakefs://dumped/v1", "lakefs://dumped/main")
    head = api(server, "GET", "/repositories/dumped/branches/main").json()["commit_id"]
    manifest = tmp_path / "refs.json"
    out = ok(cli, "refs-dump", "lakefs://dumped", "-o", str(manifest),
             "--pull-interval", "1s").stdout
    assert out == f"Writing refs to {manifest}\n"
    refs = json.loads(manifest.read_text())
    assert set(refs) == {"commits_meta_range_id", "tags_meta_range_id",
                         "branches_meta_range_id"}
    assert json.loads(ok(cli, "refs-dump", "lakefs://dumped").stdout) == refs

    ok(cli, "repo", "delete", "lakefs://dumped", "-y")
    out = ok(cli, "repo", "create-bare", "lakefs://dumped", "local://dumped").stdout
    assert out.startswith("Repository: lakefs://dumped\nRepository 'dumped' created:\n"
                          "storage namespace: local://dumped\ndefault branch: main\n")
    assert not any(b["commit_id"] for b in api(server, "GET", "/repositories/dumped/branches")
                   .json()["results"])
    out = ok(cli, "refs-restore", "lakefs://dumped", "--manifest", "-",
             input=manifest.read_text()).stdout
    assert out == "Repository: lakefs://dumped\n\nAll references restored successfully!\n"
    assert api(server, "GET", "/repositories/dumped/branches/main").json()[
        "commit_id"] == head
    assert ok(cli, "tag", "show", "lakefs://dumped/v1").stdout == f"v1 {head}\n"
    assert ok(cli, "fs", "cat", "lakefs://dumped/main/x").stdout == "x"
    refused = fails(cli, "refs-restore", "lakefs://dumped", "--manifest", str(manifest))
    assert refused.stderr.startswith("can only restore into a bare repository\n")


def test_gc_config(cli: CliRunner, tmp_path: Path) -> None:
    ok(cli, "repo", "create", "lakefs://collected", "local://collected")
    rules = {"default_retention_days": 21,
             "branches": [{"branch_id": "main", "retention_days": 28}]}
    (tmp_path / "gc.json").write_text(json.dumps(rules))
    ok(cli, "gc", "set-config", "lakefs://collected", "-f", str(tmp_path / "gc.json"))
    assert ok(cli, "gc", "get-config", "lakefs://collected").stdout == (
        "Default Retention Days: 21\nBranch Rules: \n  - Branch: main\n"
        "    Retention Days: 28\n")
    assert json.loads(ok(cli, "gc", "get-config", "lakefs://collected", "--json").stdout) == rules
    ok(cli, "gc", "set-config", "lakefs://collected", "-f", "-",
       input=json.dumps({"default_retention_days": 7, "branches": []}))
    assert ok(cli, "gc", "get-config", "lakefs://collected").stdout.startswith(
        "Default Retention Days: 7\n")
    ok(cli, "gc", "delete-config", "lakefs://collected")
    assert fails(cli, "gc", "get-config", "lakefs://collected").stderr.startswith(
        "no garbage collection rules\n")


def test_actions_validate(cli: CliRunner, tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("name: gate\non:\n  pre-commit:\n    branches: [main]\nhooks:\n"
                    "  - id: check\n    type: webhook\n    properties:\n"
                    "      url: http://127.0.0.1:9/hook\n")
    assert ok(cli, "actions", "validate", str(good)).stdout == (
        f"File validated successfully: '{good}'\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: gate\nhooks: []\n")
    fails(cli, "actions", "validate", str(bad))
    assert "no such file" in fails(cli, "actions", "validate",
                                   str(tmp_path / "none.yaml")).stderr.lower()


def test_identity_and_usage(cli: CliRunner, server: LiveServer) -> None:
    lines = ok(cli, "identity").stdout.splitlines()
    assert lines[0] == "User ID:          admin" and lines[1].startswith("Email:")
    assert lines[2].startswith("Creation Date:    ")
    summary = api(server, "GET", "/usage-report/summary").json()
    out = ok(cli, "usage", "summary").stdout
    assert out.startswith(f"Usage report for installation ID: {summary['installation_id']}\n")
    assert json.loads(ok(cli, "usage", "summary", "-o", "json").stdout) == summary


def test_config_writes_the_file_doctor_checks_it(server: LiveServer, tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "LAKECTL_INTERACTIVE": "false"}
    cli = CliRunner(env=env)
    answers = f"{ADMIN_KEY}\n{ADMIN_SECRET}\nnot a url\n{server.endpoint}\n"
    result = ok(cli, "config", input=answers)
    file = tmp_path / ".lakectl.yaml"
    assert result.stdout.startswith(f"Config file {file} will be used\n")
    assert yaml.safe_load(file.read_text()) == {
        "credentials": {"access_key_id": ADMIN_KEY, "secret_access_key": ADMIN_SECRET},
        "server": {"endpoint_url": server.endpoint}}
    assert ok(cli, "doctor").stdout == "Valid configuration\n"
    assert ok(cli, "repo", "list").exit_code == 0  # the file is what lakectl reads

    # again: the current values are the defaults, kept by an empty answer
    ok(cli, "config", input="\n\n\n")
    assert yaml.safe_load(file.read_text())["server"]["endpoint_url"] == server.endpoint

    wrong = CliRunner(env={**env, "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": "wrong"})
    out = ok(wrong, "doctor").stdout
    assert out.startswith("It seems like the `access_key_id` or `secret_access_key` you "
                          "supplied are wrong.\n")
    assert "secret_access_key value looks suspicious..." in out
    down = CliRunner(env={**env, "LAKECTL_SERVER_ENDPOINT_URL": "http://127.0.0.1:9/api/v1",
                          "LAKECTL_SERVER_RETRIES_ENABLED": "false"})
    assert ok(down, "doctor").stdout.startswith("It looks like endpoint url is wrong.\n")


def test_completion_scripts() -> None:
    for shell, marker in (("bash", "complete "), ("zsh", "compdef"), ("fish", "complete "),
                          ("powershell", "Register-ArgumentCompleter")):
        result = CliRunner().invoke(lakectl, ["completion", shell])
        assert result.exit_code == 0 and marker in result.stdout
        assert "_LAKECTL_COMPLETE" in result.stdout
    assert CliRunner().invoke(lakectl, ["completion", "tcsh"]).exit_code == 1
