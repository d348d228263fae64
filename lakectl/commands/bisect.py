"""``lakectl bisect``: a binary search over the commits between a good and a bad ref for
the one that introduced a change, its state kept in ``~/.lakectl.bisect.json``."""

from __future__ import annotations

import json
import math
import os
import subprocess
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from lakectl.commands.commits import commit_text
from lakectl.output import Fatal
from lakectl.session import Session, pass_session

STATE_FILE = "~/.lakectl.bisect.json"
LOG_PAGE = 500
NOT_STARTED = 'You need to start by "bisect start"'


def _state_path() -> Path:
    return Path(STATE_FILE).expanduser()


@dataclass
class Bisection:
    """A bisect session: the commits from bad (first) down to good (excluded)."""

    repository: str
    bad_commit: str
    good_commit: str
    created: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    commits: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def load(cls) -> Bisection:
        try:
            doc = json.loads(_state_path().read_text())
        except FileNotFoundError:
            raise Fatal(NOT_STARTED) from None
        return cls(repository=doc["repository"], bad_commit=doc.get("badCommit", ""),
                   good_commit=doc.get("goodCommit", ""), created=doc.get("created", ""),
                   commits=doc.get("commits") or [])

    def save(self) -> None:
        doc = asdict(self)
        doc["badCommit"], doc["goodCommit"] = doc.pop("bad_commit"), doc.pop("good_commit")
        _state_path().write_text(json.dumps(doc))

    def select(self, good: bool) -> None:
        """The commit in the middle is good (the change is newer) or bad (it or older)."""
        if len(self.commits) <= 1:
            return
        half = len(self.commits) >> 1
        self.commits = self.commits[:half] if good else self.commits[half:]
        self.save()

    def status(self) -> str:
        lines = [f"Repository: {self.repository}"]
        n = len(self.commits)
        if n == 0:
            lines.append("No commits found")
        elif n == 1:
            c = self.commits[0]
            lines.append(f"Found commit lakefs://{self.repository}/{c['id']} {c['message']}")
        else:
            middle = (n >> 1) - 1
            c = self.commits[middle]
            lines.append(f"Bisecting: {middle} commits left to test after this "
                         f"(roughly {int(math.log2(n))} steps)")
            lines.append(f"Current commit lakefs://{self.repository}/{c['id']} {c['message']}")
        return "\n".join(lines)


def _commits_between(s: Session, repository: str, bad: str, good: str) -> list[dict[str, Any]]:
    commits: list[dict[str, Any]] = []
    for c in s.every(f"/repositories/{repository}/refs/{bad}/commits", {}, LOG_PAGE):
        if c["id"] == good:
            return commits
        commits.append(c)
    raise Fatal("good commit not found")


@click.group("bisect")
def bisect() -> None:
    """Binary search to find the commit that introduced a bug"""


@bisect.command("start")
@click.argument("bad_ref", metavar="<bad ref>")
@click.argument("good_ref", metavar="<good ref>")
@pass_session
def start(s: Session, bad_ref: str, good_ref: str) -> None:
    """Start a bisect session"""
    bad = s.ref_uri(bad_ref, "bad")
    good = s.ref_uri(good_ref, "good")
    if good.repository != bad.repository:
        raise Fatal("Two references doesn't use the same repository")
    repository = s.json("GET", f"/repositories/{bad.repository}")["id"]
    bad_id = s.json("GET", f"/repositories/{repository}/commits/{bad.ref}")["id"]
    good_id = s.json("GET", f"/repositories/{repository}/commits/{good.ref}")["id"]
    state = Bisection(repository, bad_id, good_id,
                      commits=_commits_between(s, repository, bad_id, good_id))
    state.save()
    click.echo(state.status())


def _select(good: bool) -> None:
    state = Bisection.load()
    state.select(good)
    click.echo(state.status())


@bisect.command("good")
def good() -> None:
    """Set current commit as 'good' commit that is known to be before the bug was
    introduced"""
    _select(True)


@bisect.command("bad")
def bad() -> None:
    """Set 'bad' commit that is known to contain the bug"""
    _select(False)


bisect.add_command(click.Command("old", callback=good.callback, help=good.help, hidden=True))
bisect.add_command(click.Command("new", callback=bad.callback, help=bad.help, hidden=True))


@bisect.command("log")
def log() -> None:
    """Print out the current bisect state"""
    click.echo(Bisection.load().status())


@bisect.command("view")
def view() -> None:
    """Current bisect commits"""
    state = Bisection.load()
    if not state.commits:
        click.echo(state.status())
        return
    for c in state.commits:
        click.echo(commit_text(c, show_meta_range_id=True))


@bisect.command("reset")
def reset() -> None:
    """Clean up the bisection state"""
    try:
        _state_path().unlink()
    except FileNotFoundError:
        raise Fatal("No active bisect session") from None
    click.echo("Cleared bisect session")


@bisect.command("run", context_settings={"ignore_unknown_options": True})
@click.argument("command", metavar="<command>", nargs=-1, required=True,
                type=click.UNPROCESSED)
def run(command: tuple[str, ...]) -> None:
    """Bisecting based on command status code

    The command runs at each commit tested, with BISECT_ID, BISECT_MESSAGE,
    BISECT_METARANGE_ID and BISECT_COMMITTER in its environment (and in its arguments as
    :BISECT_ID: ...); exit status 0 marks the commit good, any other bad.
    """
    state = Bisection.load()
    while len(state.commits) > 1:
        c = state.commits[len(state.commits) >> 1]
        values = {"BISECT_ID": c["id"], "BISECT_MESSAGE": c.get("message", ""),
                  "BISECT_METARANGE_ID": c.get("meta_range_id", ""),
                  "BISECT_COMMITTER": c.get("committer", "")}
        args = list(command)
        for key, value in values.items():
            args = [a.replace(f":{key}:", value) for a in args]
        click.echo(f"== Commit [{c['id']}] {c.get('message', '')}")
        try:
            passed = subprocess.run(args, env={**os.environ, **values}, check=False).returncode == 0
        except OSError as e:
            raise Fatal(f"exec: {args[0]}: {e.strerror}") from None
        click.echo(f"-- {'GOOD' if passed else 'BAD'} [{c['id']}] {c.get('message', '')}")
        state.select(passed)
    click.echo(state.status())
