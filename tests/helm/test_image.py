"""The image the chart runs: one Dockerfile, the two console scripts as entrypoints.

No container runtime is available here, so the Dockerfile is checked against the
packaging metadata and the chart rather than built.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "Dockerfile"
TEMPLATES = REPO_ROOT / "helm" / "lakefs-mirror" / "templates"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            result.append((word.upper(), rest.strip()))
    return result


def console_scripts() -> dict[str, str]:
    meta = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    scripts: dict[str, str] = meta["project"]["scripts"]
    return scripts


def packages() -> list[str]:
    meta = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    include: list[str] = meta["tool"]["setuptools"]["packages"]["find"]["include"]
    return [p.rstrip("*") for p in include]


def test_default_command_is_the_server_script() -> None:
    cmd = [args for word, args in instructions() if word == "CMD"]
    assert len(cmd) == 1
    argv = json.loads(cmd[0])
    assert argv[0] in console_scripts()
    assert console_scripts()[argv[0]].startswith("lakefs_core")


def test_every_package_is_copied_into_the_build() -> None:
    copied = " ".join(args for word, args in instructions() if word == "COPY")
    for package in packages():
        assert re.search(rf"(^|\s){package}(\s|/|$)", copied), package
    dockerignore = (REPO_ROOT / ".dockerignore").read_text(encoding="utf-8")
    for package in packages():
        assert f"!{package}/" in dockerignore


def test_image_runs_unprivileged_with_the_chart_user() -> None:
    users = [args for word, args in instructions() if word == "USER"]
    assert users and users[-1].split(":")[0] == "10001"
    values = (REPO_ROOT / "helm" / "lakefs-mirror" / "values.yaml").read_text(encoding="utf-8")
    assert "runAsUser: 10001" in values


def test_chart_commands_are_console_scripts_of_the_image() -> None:
    commands = []
    for template in TEMPLATES.glob("*.yaml"):
        for match in re.finditer(r"command: (\[.*\])", template.read_text(encoding="utf-8")):
            commands.append(json.loads(match.group(1)))
    assert sorted(c[0] for c in commands) == ["lakefs-core", "lakefs-replication"]
    scripts = console_scripts()
    for argv in commands:
        assert argv[0] in scripts
    assert scripts["lakefs-replication"].startswith("replication")


def test_both_ports_are_exposed() -> None:
    exposed = " ".join(args for word, args in instructions() if word == "EXPOSE").split()
    assert set(exposed) == {"8000", "8008"}
