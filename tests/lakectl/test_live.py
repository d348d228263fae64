"""lakectl against a real server: in-process (click's runner) and as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from lakectl import lakectl
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET, LiveServer, live_server

DEATH = "Error executing command."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("lakectl-server"))) as srv:
        yield srv


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home directory without ~/.lakectl.yaml (variables configure lakectl)."""
    return tmp_path_factory.mktemp("home")


def environment(server: LiveServer, home: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(home), "LAKECTL_INTERACTIVE": "false",
            "LAKECTL_SERVER_ENDPOINT_URL": server.endpoint,
            "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": ADMIN_KEY,
            "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": ADMIN_SECRET, **extra}


@pytest.fixture(scope="module")
def cli(server: LiveServer, home: Path) -> CliRunner:
    return CliRunner(env=environment(server, home))


def ok(cli: CliRunner, *args: str, input: bytes | str | None = None) -> Result:
    result = cli.invoke(lakectl, list(args), input=input)
    assert result.exit_code == 0, (args, result.stdout, result.stderr, result.exception)
    return result


def fails(cli: CliRunner, *args: str) -> Result:
    result = cli.invoke(lakectl, list(args))
    assert result.exit_code == 1, (args, result.stdout, result.stderr, result.exception)
    assert result.stderr.endswith(f"\n{DEATH}\n"), result.stderr
    return result


def api(server: LiveServer, method: str, path: str, **kwargs: object) -> httpx.Response:
    with server.client() as c:
        return c.request(method, path, **kwargs)  # type: ignore[arg-type]


def test_versioning_workflow(cli: CliRunner, server: LiveServer, tmp_path: Path) -> None:
    out = ok(cli, "repo", "create", "lakefs://flow", "local://flow").stdout
    assert "Repository 'flow' created:\nstorage namespace: local://flow\n" in out
    assert "default branch: main\n" in out
    listed = ok(cli, "repo", "list").stdout.splitlines()
    row = next(line.split("\t") for line in listed if line.startswith("flow\t"))
    assert row[2] == "main" and row[4] == "local://flow"

    (tmp_path / "a.csv").write_text("x,y\n1,2\n")
    ok(cli, "fs", "upload", "lakefs://flow/main/data/a.csv", "-s", str(tmp_path / "a.csv"),
       "--no-progress")
    ok(cli, "fs", "upload", "lakefs://flow/main/readme.txt", "-s", "-", "--no-progress",
       input=b"from stdin\n")
    assert ok(cli, "diff", "lakefs://flow/main").stdout.splitlines() == [
        "+ added data/a.csv", "+ added readme.txt"]
    ls = ok(cli, "fs", "ls", "lakefs://flow/main/").stdout.splitlines()
    assert [line.split()[0] for line in ls] == ["common_prefix", "object"]
    assert ls[0].endswith("    data/") and ls[1].endswith("    readme.txt") and "11 B" in ls[1]

    out = ok(cli, "commit", "lakefs://flow/main", "-m", "first data",
             "--meta", "source=test,kind=csv").stdout
    assert out.startswith('Branch: lakefs://flow/main\nCommit for branch "main" completed.\n')
    head = api(server, "GET", "/repositories/flow/branches/main").json()["commit_id"]
    assert f"ID: {head}\n" in out and "Message: first data\n" in out
    assert api(server, "GET", f"/repositories/flow/commits/{head}").json()["metadata"] == {
        "source": "test", "kind": "csv"}
    no_message = fails(cli, "commit", "lakefs://flow/main")
    assert no_message.stderr.startswith("Commit message empty!")
    assert "no changes" in fails(cli, "commit", "lakefs://flow/main",
                                 "--allow-empty-message").stderr
    ok(cli, "commit", "lakefs://flow/main", "--allow-empty-message", "--allow-empty-commit")
    head = api(server, "GET", "/repositories/flow/branches/main").json()["commit_id"]

    out = ok(cli, "branch", "create", "lakefs://flow/dev", "-s", "lakefs://flow/main").stdout
    assert out == f"Source ref: lakefs://flow/main\ncreated branch 'dev' {head}\n"
    before = int(time.time())
    ok(cli, "branch", "create", "lakefs://flow/scratch", "-s", "lakefs://flow/main",
       "--ttl", "1h30m")
    expires = api(server, "GET", "/repositories/flow/branches/scratch").json()["expires_at"]
    assert before + 5400 <= expires <= int(time.time()) + 5400
    assert ok(cli, "branch", "show", "lakefs://flow/scratch").stdout.endswith(
        f"Expires at: {expires}\n")
    assert "invalid duration '1x'" in fails(
        cli, "branch", "create", "lakefs://flow/bad", "-s", "lakefs://flow/main",
        "--ttl", "1x").stderr
    ok(cli, "branch", "delete", "lakefs://flow/scratch", "-y")
    assert ok(cli, "branch", "show", "lakefs://flow/dev").stdout == (
        f"Branch: lakefs://flow/dev\nCommit ID: {head}\n")
    ok(cli, "fs", "rm", "lakefs://flow/dev/readme.txt")
    ok(cli, "commit", "lakefs://flow/dev", "-m", "no readme")
    assert ok(cli, "diff", "lakefs://flow/main", "lakefs://flow/dev").stdout == (
        "- removed readme.txt\n")
    out = ok(cli, "merge", "lakefs://flow/dev", "lakefs://flow/main").stdout
    merged = api(server, "GET", "/repositories/flow/branches/main").json()["commit_id"]
    assert out.endswith(f'Merged "dev" into "main" to get "{merged}".\n')
    assert ok(cli, "fs", "ls", "lakefs://flow/main/").stdout.split()[-1] == "data/"

    log = ok(cli, "log", "lakefs://flow/main").stdout
    ids = [line.split()[1] for line in log.splitlines() if line.startswith("ID:")]
    assert ids[0] == merged and ids[-1] == api(
        server, "GET", "/repositories/flow/refs/main/commits").json()["results"][-1]["id"]
    assert "Merge:         " in log and "\t\tsource = test" in log
    assert len([line for line in ok(cli, "log", "lakefs://flow/main", "--amount", "2").stdout
                .splitlines() if line.startswith("ID:")]) == 2
    first_parent = ok(cli, "log", "lakefs://flow/main", "--first-parent", "--no-merges").stdout
    assert merged not in first_parent and head in first_parent

    assert ok(cli, "tag", "create", "lakefs://flow/v1", f"lakefs://flow/{head}").stdout == (
        f"Created tag 'v1' ({head})\n")
    assert ok(cli, "tag", "show", "lakefs://flow/v1").stdout == f"v1 {head}\n"
    assert ok(cli, "tag", "list", "lakefs://flow").stdout == f"v1\t{head}\n"
    ok(cli, "tag", "delete", "lakefs://flow/v1", "-y")
    assert ok(cli, "tag", "list", "lakefs://flow").stdout == ""

    ok(cli, "branch", "reset", "lakefs://flow/dev", "-y")
    ok(cli, "branch", "delete", "lakefs://flow/dev", "-y")
    assert ok(cli, "branch", "list", "lakefs://flow").stdout == f"main\t{merged}\n"
    aborted = fails(cli, "repo", "delete", "lakefs://flow")  # no terminal: no confirmation
    assert "Delete Repository 'flow' aborted" in aborted.stderr
    assert ok(cli, "repo", "delete", "lakefs://flow", "-y").stdout.endswith(
        "Repository 'flow' deleted\n")
    assert api(server, "GET", "/repositories/flow").status_code == 404


def test_json_output_is_the_servers_objects(cli: CliRunner, server: LiveServer) -> None:
    ok(cli, "repo", "create", "lakefs://shapes", "local://shapes")
    ok(cli, "fs", "upload", "lakefs://shapes/main/k.txt", "-s", "-", "--no-progress",
       input=b"abc")
    commit = json.loads(ok(cli, "commit", "lakefs://shapes/main", "-m", "one",
                           "-o", "json").stdout)
    assert commit == api(server, "GET", f"/repositories/shapes/commits/{commit['id']}").json()

    branches = json.loads(ok(cli, "branch", "list", "lakefs://shapes", "-o", "json").stdout)
    assert branches == api(server, "GET", "/repositories/shapes/branches").json()
    stat = json.loads(ok(cli, "fs", "stat", "lakefs://shapes/main/k.txt", "-o", "json").stdout)
    assert stat["path"] == "k.txt" and stat["size_bytes"] == 3
    log = json.loads(ok(cli, "log", "lakefs://shapes/main", "-o", "json").stdout)
    assert [c["id"] for c in log["results"]] == [
        c["id"] for c in api(server, "GET", "/repositories/shapes/refs/main/commits").json()[
            "results"]]
    assert log["pagination"]["has_more"] is False
    repos = json.loads(ok(cli, "repo", "list", "--amount", "1", "-o", "json").stdout)
    assert len(repos["results"]) == 1 and "has_more" in repos["pagination"]


def test_terminal_tables_and_dot_graph(cli: CliRunner, server: LiveServer, home: Path) -> None:
    ok(cli, "repo", "create", "lakefs://views", "local://views")
    ok(cli, "branch", "create", "lakefs://views/b1", "-s", "lakefs://views/main")
    terminal = CliRunner(env=environment(server, home, LAKECTL_INTERACTIVE="true"))
    result = terminal.invoke(lakectl, ["branch", "list", "lakefs://views", "--amount", "1"])
    assert result.exit_code == 0, result.stderr
    assert "Branch" in result.stdout and "Commit ID" in result.stdout and "b1" in result.stdout
    assert 'for more results run with --amount 1 --after "b1"' in result.stdout
    dot = ok(cli, "log", "--dot", "lakefs://views/main").stdout
    head = api(server, "GET", "/repositories/views/branches/main").json()["commit_id"]
    assert dot.startswith("digraph {") and f'"{head}" [shape=note' in dot


def test_transfers_show_progress_and_keep_bytes(cli: CliRunner, tmp_path: Path) -> None:
    ok(cli, "repo", "create", "lakefs://bulk", "local://bulk")
    src = tmp_path / "src"
    (src / "nested").mkdir(parents=True)
    big = os.urandom(3 * 1024 * 1024 + 17)
    (src / "big.bin").write_bytes(big)
    (src / "nested" / "small.txt").write_text("small\n")
    (src / "empty").write_bytes(b"")

    result = ok(cli, "fs", "upload", "lakefs://bulk/main/in/", "-s", str(src), "-r")
    assert result.stdout == "\nUpload Summary:\n\nUploaded: 3\n"
    assert "upload 3 files" in result.stderr and "upload in/big.bin" in result.stderr
    assert "3.1/3.1 MB" in result.stderr  # the bar of all the bytes, complete
    listed = ok(cli, "fs", "ls", "-r", "lakefs://bulk/main/in/").stdout.splitlines()
    assert [line.split()[-1] for line in listed] == ["in/big.bin", "in/empty",
                                                     "in/nested/small.txt"]

    dest = tmp_path / "dest"
    result = ok(cli, "fs", "download", "lakefs://bulk/main/in", str(dest))
    assert result.stdout == "\nDownload Summary:\n\nDownloaded: 3\n"
    assert "download in/big.bin" in result.stderr
    assert (dest / "big.bin").read_bytes() == big
    assert (dest / "nested" / "small.txt").read_text() == "small\n"
    assert (dest / "empty").read_bytes() == b""

    quiet = ok(cli, "fs", "download", "lakefs://bulk/main/in/big.bin", str(tmp_path / "one"),
               "--no-progress")
    assert quiet.stderr == "" and (tmp_path / "one").read_bytes() == big
    assert ok(cli, "fs", "cat", "lakefs://bulk/main/in/nested/small.txt").stdout_bytes == (
        b"small\n")

    ok(cli, "fs", "rm", "-r", "lakefs://bulk/main/in/")
    assert ok(cli, "fs", "ls", "-r", "lakefs://bulk/main/").stdout == ""


def test_errors_exit_1_with_the_message_on_stderr(cli: CliRunner, server: LiveServer,
                                                  home: Path) -> None:
    assert fails(cli, "branch", "show", "main").stderr == (
        f"branch URI parsing main: malformed lakefs uri\n{DEATH}\n")
    assert fails(cli, "branch", "list", "lakefs://repo1/main").stderr == (
        f"repository URI not a valid repo uri\n{DEATH}\n")
    missing = fails(cli, "branch", "show", "lakefs://no-such-repo/main")
    assert "not found" in missing.stderr and missing.stdout == ""
    fails(cli, "fs", "cat", "lakefs://no-such-repo/main/x")

    bad_key = CliRunner(env=environment(server, home,
                                        LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY="wrong"))
    result = bad_key.invoke(lakectl, ["repo", "list"])
    with server.client(ADMIN_KEY, "wrong") as c:
        refused = c.get("/repositories")
    assert refused.status_code == 401
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == f"{refused.json()['message']}\n{DEATH}\n"  # the server's words

    usage = cli.invoke(lakectl, ["branch", "create", "lakefs://x/y"])  # -s is required
    assert usage.exit_code == 1 and "Missing option '-s'" in usage.stderr

    ok(cli, "repo", "create", "lakefs://clash", "local://clash")
    ok(cli, "branch", "create", "lakefs://clash/other", "-s", "lakefs://clash/main")
    for branch, data in (("main", b"main"), ("other", b"other")):
        ok(cli, "fs", "upload", f"lakefs://clash/{branch}/f", "-s", "-", "--no-progress",
           input=data)
        ok(cli, "commit", f"lakefs://clash/{branch}", "-m", branch)
    assert fails(cli, "merge", "lakefs://clash/other", "lakefs://clash/main").stderr == (
        f"Conflict found.\n{DEATH}\n")
    ok(cli, "merge", "lakefs://clash/other", "lakefs://clash/main", "--strategy", "source-wins")
    assert ok(cli, "fs", "cat", "lakefs://clash/main/f").stdout == "other"

    down = CliRunner(env=environment(server, home,
                                     LAKECTL_SERVER_ENDPOINT_URL="http://127.0.0.1:9",
                                     LAKECTL_SERVER_RETRIES_ENABLED="false"))
    result = down.invoke(lakectl, ["repo", "list"])
    assert result.exit_code == 1 and "unreachable" in result.stderr


def test_console_script_reads_lakectl_yaml(server: LiveServer, tmp_path: Path) -> None:
    """The installed ``lakectl`` script, configured by a file only, as users run it."""
    script = Path(sys.executable).with_name("lakectl")
    assert script.is_file(), "the lakectl console script is not installed (pip install -e .)"
    (tmp_path / ".lakectl.yaml").write_text(
        f"credentials:\n  access_key_id: {ADMIN_KEY}\n  secret_access_key: {ADMIN_SECRET}\n"
        f"server:\n  endpoint_url: {server.endpoint}/api/v1\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_")}
    env["HOME"] = str(tmp_path)

    def run(*args: str, data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([str(script), *args], input=data, env=env, capture_output=True,
                              timeout=120, check=False)

    created = run("repo", "create", "lakefs://proc", "local://proc")
    assert created.returncode == 0, created.stderr
    payload = os.urandom(64 * 1024)
    up = run("fs", "upload", "lakefs://proc/main/blob", "-s", "-", data=payload)
    assert up.returncode == 0, up.stderr
    assert b"upload blob" in up.stderr  # the progress bar, printed once when not a terminal
    cat = run("fs", "cat", "lakefs://proc/main/blob")
    assert cat.returncode == 0 and cat.stdout == payload
    gone = run("branch", "show", "lakefs://proc/no-such-branch")
    assert gone.returncode == 1 and gone.stderr.endswith(DEATH.encode() + b"\n")
    assert b"not found" in gone.stderr
