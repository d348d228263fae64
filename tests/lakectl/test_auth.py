"""``lakectl auth``: users, credentials, groups and policies against a live server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from lakectl import lakectl
from lakefs_testing.live_server import ADMIN_KEY, LiveServer, live_server
from tests.lakectl.test_live import DEATH, api, environment, fails, ok

POLICY = {"statement": [{"effect": "allow", "resource": "arn:lakefs:fs:::repository/*",
                         "action": ["fs:ReadObject", "fs:ListObjects"]}]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("lakectl-auth"))) as srv:
        yield srv


@pytest.fixture
def cli(server: LiveServer, tmp_path: Path) -> CliRunner:
    return CliRunner(env=environment(server, tmp_path))


def test_users_credentials_groups_and_policies(cli: CliRunner, server: LiveServer,
                                               tmp_path: Path) -> None:
    out = ok(cli, "auth", "users", "create", "--id", "alice").stdout
    assert out.startswith("User created successfully.\nID: alice\nCreation Date: ")
    assert "alice" in [line.split("\t")[0] for line in
                       ok(cli, "auth", "users", "list").stdout.splitlines()]
    assert "already exists" in fails(cli, "auth", "users", "create", "--id", "alice").stderr

    created = ok(cli, "auth", "users", "credentials", "create", "--id", "alice").stdout
    lines = created.splitlines()
    assert lines[0] == "Credentials created successfully."
    key = lines[1].split()[-1]
    secret = lines[2].split()[-1]
    assert lines[1].startswith("Access Key ID:     ") and lines[2].startswith(
        "Secret Access Key: ")
    assert "you will not be able to see the secret key again" in created
    listed = ok(cli, "auth", "users", "credentials", "list", "--id", "alice").stdout
    assert [line.split("\t")[0] for line in listed.splitlines()] == [key]
    # the new key works, and without --id the credentials are the caller's own
    as_alice = CliRunner(env=environment(server, tmp_path,
                                         LAKECTL_CREDENTIALS_ACCESS_KEY_ID=key,
                                         LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY=secret))
    assert ok(as_alice, "identity").stdout.startswith("User ID:          alice\n")
    assert ok(cli, "auth", "users", "credentials", "list").stdout.split("\t")[0] == ADMIN_KEY

    (tmp_path / "policy.json").write_text(json.dumps(POLICY))
    out = ok(cli, "auth", "policies", "create", "--id", "Readers",
             "--statement-document", str(tmp_path / "policy.json")).stdout
    assert out.startswith("Policy created successfully.\n\nID: Readers\nCreation Date: ")
    assert json.loads(out[out.index("{"):]) == POLICY
    shown = ok(cli, "auth", "policies", "show", "--id", "Readers").stdout
    assert json.loads(shown[shown.index("{"):]) == POLICY
    ok(cli, "auth", "policies", "create", "--id", "FromStdin", "--statement-document", "-",
       input=json.dumps(POLICY))
    ids = [line.split("\t")[0] for line in ok(cli, "auth", "policies", "list").stdout
           .splitlines()]
    assert {"Readers", "FromStdin"} <= set(ids)
    assert "could not parse statement JSON document" in fails(
        cli, "auth", "policies", "create", "--id", "Bad", "--statement-document", "-").stderr

    out = ok(cli, "auth", "groups", "create", "--id", "analysts").stdout
    assert out.startswith("Group created successfully.\nID: analysts\n")
    assert ok(cli, "auth", "groups", "members", "add", "--id", "analysts",
              "--user", "alice").stdout == "User successfully added\n"
    assert ok(cli, "auth", "groups", "members", "list", "--id", "analysts").stdout == "alice\n"
    assert ok(cli, "auth", "groups", "policies", "attach", "--id", "analysts",
              "--policy", "Readers").stdout == "Policy attached successfully\n"
    rows = [line.split("\t") for line in ok(cli, "auth", "groups", "policies", "list", "--id",
                                            "analysts").stdout.splitlines()]
    assert [(r[0], r[2], r[3], r[4], r[5]) for r in rows] == [
        ("Readers", "0", "arn:lakefs:fs:::repository/*", "allow",
         "fs:ReadObject, fs:ListObjects")]
    assert ok(cli, "auth", "users", "groups", "list", "--id", "alice").stdout.split(
        "\t")[0] == "analysts"
    # a user's own policies, and with --effective those of its groups too
    ok(cli, "auth", "users", "policies", "attach", "--id", "alice", "--policy", "FromStdin")
    own = ok(cli, "auth", "users", "policies", "list", "--id", "alice").stdout
    assert {line.split("\t")[0] for line in own.splitlines()} == {"FromStdin"}
    effective = ok(cli, "auth", "users", "policies", "list", "--id", "alice",
                   "--effective", "-o", "json").stdout
    assert {p["id"] for p in json.loads(effective)["results"]} == {"FromStdin", "Readers"}
    assert ok(cli, "auth", "users", "policies", "detach", "--id", "alice",
              "--policy", "FromStdin").stdout == "Policy detached successfully\n"
    ok(cli, "auth", "groups", "policies", "detach", "--id", "analysts", "--policy", "Readers")
    assert ok(cli, "auth", "groups", "policies", "list", "--id", "analysts").stdout == ""

    # lakectl's earlier member commands still work
    ok(cli, "auth", "groups", "remove-member", "--id", "analysts", "--user", "alice")
    assert ok(cli, "auth", "groups", "list-members", "--id", "analysts").stdout == ""
    ok(cli, "auth", "groups", "add-member", "--id", "analysts", "--user", "alice")
    assert ok(cli, "auth", "groups", "members", "remove", "--id", "analysts",
              "--user", "alice").stdout == "User successfully removed\n"

    assert ok(cli, "auth", "users", "credentials", "delete", "--id", "alice",
              "--access-key-id", key).stdout == "Credentials deleted successfully\n"
    assert ok(cli, "auth", "users", "credentials", "list", "--id", "alice").stdout == ""
    assert ok(cli, "auth", "groups", "delete", "--id", "analysts").stdout == (
        "Group deleted successfully\n")
    assert ok(cli, "auth", "policies", "delete", "--id", "Readers").stdout == (
        "Policy deleted successfully\n")
    assert ok(cli, "auth", "users", "delete", "--id", "alice").stdout == (
        "User deleted successfully\n")
    assert api(server, "GET", "/auth/users/alice").status_code == 404
    missing = fails(cli, "auth", "users", "delete", "--id", "alice")
    assert missing.stderr.endswith(f"\n{DEATH}\n") and "not found" in missing.stderr
    usage = cli.invoke(lakectl, ["auth", "users", "create"])
    assert usage.exit_code == 1 and "Missing option '--id'" in usage.stderr


def test_json_output_is_the_servers_objects(cli: CliRunner, server: LiveServer) -> None:
    user = json.loads(ok(cli, "auth", "users", "create", "--id", "bob", "-o", "json").stdout)
    assert user == api(server, "GET", "/auth/users/bob").json()
    listed = json.loads(ok(cli, "auth", "users", "list", "-o", "json").stdout)
    assert listed == api(server, "GET", "/auth/users").json()
    ok(cli, "auth", "users", "delete", "--id", "bob")
