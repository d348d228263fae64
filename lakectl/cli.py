"""The ``lakectl`` root command: global flags, the command groups, exit statuses.

Every failure exits with status 1 and its message on stderr, as lakectl: a server
error (its ``message``: ``error authenticating request``, ``not found``, ...), a bad
address (``branch URI not a valid branch uri``), a usage error, a missing file.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, NoReturn

import click

from lakectl.commands import plugin as plugins
from lakectl.commands.abuse import abuse
from lakectl.commands.actions import actions, cat_hook_output
from lakectl.commands.annotate import annotate, blame
from lakectl.commands.auth import auth
from lakectl.commands.bisect import bisect
from lakectl.commands.branch import branch
from lakectl.commands.branch_protect import branch_protect
from lakectl.commands.commits import cherry_pick, commit, diff, find_merge_base, log, merge, show
from lakectl.commands.completion import completion
from lakectl.commands.configure import config, doctor
from lakectl.commands.dbt import dbt
from lakectl.commands.docs import docs
from lakectl.commands.fs import fs
from lakectl.commands.gc import gc
from lakectl.commands.identity import identity, usage
from lakectl.commands.importing import import_
from lakectl.commands.ingest import ingest
from lakectl.commands.local import local
from lakectl.commands.metastore import metastore
from lakectl.commands.mirror import mirror
from lakectl.commands.plugin import plugin, plugin_command
from lakectl.commands.refs import refs_dump, refs_restore
from lakectl.commands.repo import repo
from lakectl.commands.sst import cat_sst
from lakectl.commands.tag import tag
from lakectl.output import DEATH_LINE, EXIT_ERROR, Fatal
from lakectl.session import App
from lakefs_core.client import ApiError
from lakefs_core.errors import LakeFSError


def _version() -> str:
    try:
        return version("lakefs-mirror")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "dev"


class LakectlGroup(click.Group):
    """Runs a command and turns every failure into lakectl's message and exit status 1;
    a name that is no command runs the plugin ``lakectl-<name>`` on ``PATH``, if any."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None:
            found = plugins.find(cmd_name)
            command = plugin_command(found) if found else None
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # the reader went away (| head): not an error
            _quit_quietly()
        except ApiError as e:
            raise Fatal(e.message or str(e)) from e
        except LakeFSError as e:
            raise Fatal(str(e)) from e
        except OSError as e:
            raise Fatal(f"{e.filename or ''}: {e.strerror or e}".lstrip(": ")) from e

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            sys.stdout.flush()
        except click.ClickException as e:  # usage errors too: lakectl exits 1 for all
            e.show()
            sys.exit(EXIT_ERROR)
        except click.Abort:
            click.echo(f"Aborted\n{DEATH_LINE}", err=True)
            sys.exit(EXIT_ERROR)
        except BrokenPipeError:
            _quit_quietly()
        sys.exit(rv if isinstance(rv, int) else 0)


def _quit_quietly() -> NoReturn:
    """Exit 0 with stdout pointed at /dev/null, so that flushing it at exit cannot fail
    again (lakectl ... | head)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture)
        sys.exit(0)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    sys.exit(0)


@click.group(cls=LakectlGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-c", "--config", "config_path", default=None, envvar="LAKECTL_CONFIG_FILE",
              help="config file (default is $HOME/.lakectl.yaml)")
@click.option("--base-uri", default=None, envvar="LAKECTL_BASE_URI",
              help="base URI used for lakeFS address parse")
@click.option("--no-color", is_flag=True, help="don't use fancy output colors")
@click.option("--verbose", is_flag=True, help="run in verbose mode")
@click.option("--log-level", default="none", hidden=True)
@click.option("--log-format", default="", hidden=True)
@click.option("--log-output", multiple=True, hidden=True)
@click.version_option(_version(), "-v", "--version", prog_name="lakectl",
                      message="%(prog)s version: %(version)s")
@click.pass_context
def lakectl(ctx: click.Context, config_path: str | None, base_uri: str | None, no_color: bool,
            verbose: bool, log_level: str, log_format: str, log_output: tuple[str, ...]) -> None:
    """A cli tool to explore manage and work with lakeFS"""
    app = App(config_path, base_uri)
    ctx.obj = app
    ctx.call_on_close(app.close)


for command in (abuse, actions, annotate, auth, bisect, blame, branch, branch_protect,
                cat_hook_output, cat_sst, cherry_pick, commit, completion, config, dbt, diff, docs,
                doctor, find_merge_base, fs, gc, identity, import_, ingest, local, log, merge,
                metastore, mirror, plugin, refs_dump, refs_restore, repo, show, tag, usage):
    lakectl.add_command(command)


def main() -> None:
    """The ``lakectl`` console script."""
    lakectl.main(prog_name="lakectl")


__all__ = ["lakectl", "main"]
