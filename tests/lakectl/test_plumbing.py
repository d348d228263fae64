"""lakectl's commands that need no server, or only the machine: ``docs``,
``completion powershell``, ``plugin list`` and running plugins."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from lakectl import lakectl


def test_docs_lists_every_command(tmp_path: Path) -> None:
    result = CliRunner().invoke(lakectl, ["docs"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.startswith("---\nlayout: default\n")
    for section in ("### lakectl\n", "### lakectl branch create\n", "### lakectl fs stage\n",
                    "### lakectl plugin list\n", "### lakectl abuse random-read\n",
                    "### lakectl metastore copy\n", "### lakectl ingest\n"):
        assert section in text, section
    stage = text.split("### lakectl fs stage\n", 1)[1].split("\n### ", 1)[0]
    assert "Link an external object with a path in a repository" in stage
    assert "```\nlakectl fs stage [OPTIONS] <path URI>\n```" in stage
    assert "--location TEXT" in stage
    hook = text.split("### lakectl cat-hook-output\n", 1)[1].split("\n### ", 1)[0]
    assert "plumbing command" in hook
    out = tmp_path / "cli.md"
    assert CliRunner().invoke(lakectl, ["docs", str(out)]).exit_code == 0
    assert out.read_text() == text


def test_powershell_completion() -> None:
    script = CliRunner().invoke(lakectl, ["completion", "powershell"])
    assert script.exit_code == 0
    assert "Register-ArgumentCompleter -Native -CommandName lakectl" in script.stdout
    assert "_LAKECTL_COMPLETE" in script.stdout
    env = {"_LAKECTL_COMPLETE": "powershell_complete", "COMP_WORDS": "lakectl bra",
           "COMP_CWORD": "1"}
    answer = CliRunner(env=env).invoke(lakectl, [], prog_name="lakectl")
    assert [line.split("\t")[1] for line in answer.stdout.splitlines()] == [
        "branch", "branch-protect"]
    env = {**env, "COMP_WORDS": "lakectl branch ", "COMP_CWORD": "2"}
    answer = CliRunner(env=env).invoke(lakectl, [], prog_name="lakectl")
    assert "plain\tcreate\tCreate a new branch in a repository" in answer.stdout.splitlines()


def _plugin(directory: Path, name: str, body: str, mode: int = 0o755) -> Path:
    path = directory / f"lakectl-{name}"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(mode)
    return path


def test_plugins_listed_and_run(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    hello = _plugin(first, "hello", 'echo "hello $*"; echo "to stderr" >&2; exit 3')
    _plugin(second, "hello", "echo shadowed")
    other = _plugin(second, "other-one", "echo other")
    plain = _plugin(second, "plain", "echo plain", mode=0o644)
    path = os.pathsep.join([str(first), str(second), str(tmp_path / "missing")])
    env = {"PATH": path}
    listed = CliRunner(env=env).invoke(lakectl, ["plugin", "list"])
    assert listed.stdout == ("The following lakectl-compatible plugins are available:\n"
                             "  hello\n  other-one\n")
    verbose = CliRunner(env=env).invoke(lakectl, ["plugin", "list", "-v"])
    assert verbose.stdout.splitlines()[1:] == [f"  {hello}", f"  {other}"]
    assert f"Warning: {plain} is not executable" in verbose.stderr
    assert (f"Warning: found multiple executables for plugin hello: {hello} and "
            f"{second / 'lakectl-hello'}") in verbose.stderr

    run_env = {**os.environ, "PATH": os.pathsep.join([path, os.environ.get("PATH", "")])}
    ran = subprocess.run([sys.executable, "-m", "lakectl", "hello", "a", "--flag", "-x"],
                         env=run_env, capture_output=True, text=True, timeout=60,
                         check=False)
    assert (ran.returncode, ran.stdout, ran.stderr) == (3, "hello a --flag -x\n",
                                                         "to stderr\n")
    # a built-in command wins over a plugin of its name
    _plugin(first, "docs", "echo plugin docs")
    builtin = subprocess.run([sys.executable, "-m", "lakectl", "docs"], env=run_env,
                             capture_output=True, text=True, timeout=60, check=False)
    assert builtin.returncode == 0 and builtin.stdout.startswith("---\n")
    unknown = CliRunner(env=env).invoke(lakectl, ["no-such-command"])
    assert unknown.exit_code == 1 and "No such command 'no-such-command'" in unknown.stderr


def test_dbt_schema_macro_and_missing_dbt(tmp_path: Path) -> None:
    from lakefs_testing.servers import MOTO_ENV

    project = tmp_path / "project"
    project.mkdir()
    no_macros = CliRunner().invoke(lakectl, ["dbt", "generate-schema-macro",
                                             "--project-root", str(project)])
    assert no_macros.exit_code == 1
    assert no_macros.stderr.startswith("The project-root should contain the macro directory\n")
    (project / "macros").mkdir()
    made = CliRunner().invoke(lakectl, ["dbt", "generate-schema-macro", "--project-root",
                                        str(project)])
    macro = project / "macros" / "generate_schema_name.sql"
    assert made.exit_code == 0 and made.stdout == f"macro created in path {macro}\n"
    assert "{{  env_var('LAKEFS_SCHEMA', target.schema) }}" in macro.read_text()
    again = CliRunner().invoke(lakectl, ["dbt", "generate-schema-macro", "--project-root",
                                         str(project)])
    assert again.exit_code == 1 and again.stderr.startswith(
        f"{macro} already exists, add lakeFS schema generation manually\n")

    env = {**MOTO_ENV, "LAKECTL_METASTORE_TYPE": "glue", "PATH": str(tmp_path / "empty"),
           "HOME": str(tmp_path)}
    no_dbt = CliRunner(env=env).invoke(lakectl, ["dbt", "create-branch-schema", "--branch",
                                                 "dev", "--project-root", str(project)])
    assert no_dbt.exit_code == 1
    assert no_dbt.stderr.startswith('exec: "dbt": executable file not found in $PATH\n')
    macro.write_text("{% macro generate_schema_name(a, b) %}x{% endmacro %}")
    wrong = CliRunner(env=env).invoke(lakectl, ["dbt", "create-branch-schema", "--branch",
                                                "dev", "--project-root", str(project)])
    assert wrong.exit_code == 1 and "does not use LAKEFS_SCHEMA" in wrong.stderr
    hive = CliRunner(env={**env, "LAKECTL_METASTORE_TYPE": "hive"}).invoke(
        lakectl, ["dbt", "create-branch-schema", "--branch", "dev"])
    assert hive.stderr.startswith("hive metastore is not supported by this lakectl")


def test_cat_sst_reads_a_commits_range_and_metarange(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from lakefs_testing.live_server import live_server
    from tests.lakectl.test_live import api

    with live_server(str(tmp_path / "server")) as server:
        assert api(server, "POST", "/repositories", json={
            "name": "ssts", "storage_namespace": "local://ssts"}).status_code == 201
        for path in ("a.csv", "b/c.csv"):
            api(server, "POST", "/repositories/ssts/branches/main/objects",
                params={"path": path, "meta": "x"}, content=b"data")
        assert api(server, "POST", "/repositories/ssts/branches/main/commits",
                   json={"message": "two"}).status_code == 201
    kinds: dict[str, Path] = {}  # of each kind, the file with the most rows
    rows_of: dict[Path, int] = {}
    for f in sorted((tmp_path / "server").rglob("*")):
        try:
            meta = pq.read_metadata(f) if f.is_file() else None
        except Exception:  # noqa: BLE001 - not a Parquet file
            continue
        kind = ((meta.metadata if meta else None) or {}).get(b"lakefs_type", b"").decode()
        if meta and kind:
            rows_of[f] = meta.num_rows
            if kind not in kinds or meta.num_rows > rows_of[kinds[kind]]:
                kinds[kind] = f
    runner = CliRunner(env={"LAKECTL_INTERACTIVE": "false"})
    ranged = runner.invoke(lakectl, ["cat-sst", "-f", str(kinds["range"])])
    assert ranged.exit_code == 0, ranged.stderr
    rows = [line.split("\t") for line in ranged.stdout.splitlines()]
    assert [(r[0], r[1]) for r in rows] == [("a.csv", "4"), ("b/c.csv", "4")]
    one = runner.invoke(lakectl, ["cat-sst", "--amount", "1", "-f", "-"],
                        input=kinds["metarange"].read_bytes())
    assert one.exit_code == 0, (one.stderr, one.exception)
    (meta,) = [line.split("\t") for line in one.stdout.splitlines()]
    assert (meta[1], meta[2], meta[3]) == ("a.csv", "b/c.csv", "2")
    other = tmp_path / "other.txt"
    other.write_text("not a table")
    bad = runner.invoke(lakectl, ["cat-sst", "-f", str(other)])
    assert bad.exit_code == 1 and bad.stderr.startswith(f"could not read {other}: ")
