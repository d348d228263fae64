"""The user documentation names what exists: links, commands, flags and settings.

Reads the README and the hand-written pages in ``docs/`` and checks, without running
anything but the Python examples of the client guide:

- every relative link points at a file, and every ``#anchor`` at a heading of it;
- every ``lakectl`` command line in a code block names real commands and options;
- every ``--flag`` of ``lakefs-core``, ``lakefs-replication`` and ``python -m ...``
  command lines is one that module's parser defines, and the module exists;
- every dotted setting in backticks (``validator.run_interval``) is a key of the
  server's or the replication service's settings, or of the Helm chart's values;
- the replication policy shown is the one the tests give the replication user;
- the Python examples of the SDK, lakefs-spec and boto3 run against a live server.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from lakectl.cli import lakectl
from lakefs_core.config import ServerConfig
from lakefs_core.settings.reference import model_rows
from lakefs_testing.live_server import LiveServer, live_server
from lakefs_testing.replication_user import broad_replication_policy
from replication.config import ReplicationConfig

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "config" / "README.md",
         *sorted(p for p in (ROOT / "docs").glob("*.md") if not p.name.startswith("CONFIG_"))]
GENERATED = sorted((ROOT / "docs").glob("CONFIG_*.md"))
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _ids(paths: list[Path]) -> list[str]:
    return [p.relative_to(ROOT).as_posix() for p in paths]


def code_blocks(page: Path, language: str | None = None) -> Iterator[str]:
    for lang, body in FENCE.findall(page.read_text(encoding="utf-8")):
        if language is None or lang == language:
            yield body


def command_lines(page: Path) -> Iterator[list[str]]:
    """The shell command lines of a page's sh blocks, as words, env assignments dropped."""
    for block in code_blocks(page, "sh"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" # ")[0].split(" | ")[0].strip()
            if not line or line.startswith("#"):
                continue
            try:
                words = shlex.split(re.sub(r"<[^<>]+>", "PLACEHOLDER", line))
            except ValueError:  # a line of a quoted string over several lines
                continue
            while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
                words.pop(0)
            if words:
                yield words


def slug(heading: str) -> str:
    """A heading's anchor, as GitHub makes it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(h) for h in re.findall(r"^#+ (.*)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES + GENERATED, ids=_ids(PAGES + GENERATED))
def test_links_resolve(page: Path) -> None:
    for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: {target} does not exist"
        if anchor and linked.suffix == ".md":
            assert anchor in anchors(linked), f"{page.name}: no heading #{anchor} in {path}"


def test_the_readme_links_every_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in PAGES[2:] + GENERATED:
        assert f"](docs/{page.name})" in readme, f"README does not link docs/{page.name}"


def _lakectl_command(words: list[str]) -> tuple[click.Command, list[click.Command]]:
    """The command a lakectl command line names, and the groups on the way."""
    command: click.Command = lakectl
    chain: list[click.Command] = [lakectl]
    for word in words[1:]:
        if word.startswith("-") or not isinstance(command, click.Group):
            break
        sub = command.commands.get(word)
        assert sub is not None, f"no command {word!r} in: {' '.join(words)}"
        command = sub
        chain.append(sub)
    return command, chain


def _options(commands: list[click.Command]) -> set[str]:
    return {name for c in commands for p in c.params if isinstance(p, click.Option)
            for name in (*p.opts, *p.secondary_opts)} | {"-h", "--help"}


LAKECTL_LINES = [(page, words) for page in PAGES for words in command_lines(page)
                 if words[0] == "lakectl"]


def test_the_pages_show_lakectl() -> None:
    verbs = {" ".join(w[1:3]) for _, w in LAKECTL_LINES}
    assert {"mirror create", "mirror detach", "mirror status", "repo create"} <= verbs


@pytest.mark.parametrize("page, words", LAKECTL_LINES,
                         ids=[f"{p.name}:{' '.join(w[1:3])}" for p, w in LAKECTL_LINES])
def test_lakectl_lines_name_real_commands_and_flags(page: Path, words: list[str]) -> None:
    command, chain = _lakectl_command(words)
    assert not isinstance(command, click.Group), f"incomplete command: {' '.join(words)}"
    known = _options(chain)
    for word in words:
        flag = word.split("=")[0]
        if flag.startswith("-") and flag != "-":
            assert flag in known, f"{page.name}: {' '.join(words)}: no option {flag}"


#: console scripts -> the module whose parser they run
SCRIPTS = {"lakefs-core": "lakefs_core.__main__", "lakefs-replication": "replication.__main__"}


def _python_commands() -> Iterator[tuple[Path, str, list[str]]]:
    for page in PAGES:
        for words in command_lines(page):
            if words[0] in SCRIPTS:
                yield page, SCRIPTS[words[0]], words
            elif words[0].endswith("python") and words[1:2] == ["-m"]:
                yield page, words[2], words


PYTHON_LINES = list(_python_commands())


@pytest.mark.parametrize("page, module, words", PYTHON_LINES,
                         ids=[f"{p.name}:{m}" for p, m, _ in PYTHON_LINES])
def test_module_command_lines_name_real_flags(page: Path, module: str, words: list[str]) -> None:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, f"{page.name}: no module {module}"
    source = Path(spec.origin)
    if source.name == "__init__.py" and (source.parent / "__main__.py").exists():
        source = source.parent / "__main__.py"
    text = source.read_text(encoding="utf-8")
    if "job_parser(" in text:  # the Spark jobs' shared options
        text += (ROOT / "lakefs_core" / "spark" / "cli.py").read_text(encoding="utf-8")
    for word in words:
        flag = word.split("=")[0]
        if re.fullmatch(r"--[a-z][a-z-]*", flag):
            assert f'"{flag}"' in text, f"{page.name}: {module} has no option {flag}"


def _keys(tree: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield prefix + str(key)
            yield from _keys(value, f"{prefix}{key}.")


def setting_keys() -> set[str]:
    keys = {row.key for model in (ServerConfig, ReplicationConfig)
            for row in model_rows(model, {})}
    values = yaml.safe_load((ROOT / "helm" / "lakefs-mirror" / "values.yaml").read_text())
    return keys | set(_keys(values))


#: the first segments of the settings' keys
TOP = {k.split(".")[0] for k in setting_keys()}
DOTTED = re.compile(r"`([a-z_]+(?:\.[a-z_0-9\[\]<>]+)+)`")


def test_the_pages_name_settings() -> None:
    named = {k for page in PAGES for k in DOTTED.findall(page.read_text(encoding="utf-8"))}
    assert {"validator.run_interval", "object_replication.mode",
            "mirrors_database.dynamodb.aws_region"} <= named


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_settings_named_in_the_pages_exist(page: Path) -> None:
    keys = setting_keys()
    for key in DOTTED.findall(page.read_text(encoding="utf-8")):
        if key.split(".")[0] not in TOP or key.endswith((".yaml", ".md", ".py")) \
                or _is_module(f"lakefs_core.{key}"):  # `auth.service`: a module
            continue
        assert key in keys, f"{page.name}: `{key}` is no setting"


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def test_the_quickstart_policy_is_the_replication_users() -> None:
    page = ROOT / "docs" / "MIRRORING_QUICKSTART.md"
    policies = [json.loads(b) for b in code_blocks(page, "json")]
    assert broad_replication_policy() in policies
    # mirrors follow tags as well as branches: the user lists them
    (quickstart,) = [p for p in policies if p["id"] == "ReplicationPolicy"]
    assert "fs:ListTags" in quickstart["statement"][0]["action"]


# --- the client guide's Python examples, run --------------------------------------------
QUICKSTART_KEY = "AKIAIOSFOLQUICKSTART"
QUICKSTART_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("docs-server"))) as s:
        yield s


def test_the_client_guide_examples_run(server: LiveServer) -> None:
    page = ROOT / "docs" / "CLIENTS.md"
    blocks = [b for b in code_blocks(page, "python") if "pyspark" not in b]
    assert len(blocks) == 3  # the SDK, lakefs-spec, boto3
    namespace: dict[str, Any] = {}
    for block in blocks:
        code = (block.replace("http://127.0.0.1:8000", server.endpoint)
                .replace(QUICKSTART_KEY, server.access_key_id)
                .replace(QUICKSTART_SECRET, server.secret_access_key))
        exec(compile(code, str(page), "exec"), namespace)  # noqa: S102
    assert namespace["data"] == b"id,amount\n1,10\n"
    assert list(namespace["frame"]["id"]) == [1, 2]
    assert namespace["body"] == b"id,amount\n2,20\n"
    assert [c["Key"] for c in namespace["listing"]["Contents"]] == [
        "main/raw/2024-01.csv", "main/raw/2024-02.csv"]
