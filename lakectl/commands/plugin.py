"""``lakectl plugin list`` and plugins: an executable ``lakectl-<name>`` on ``PATH``
runs as ``lakectl <name> [args...]``, as in lakeFS's lakectl.

A built-in command always wins over a plugin of the same name. The plugin gets
lakectl's environment and standard streams; its exit status is lakectl's.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from dataclasses import dataclass

import click

PREFIX = "lakectl-"

PLUGIN_HELP = """Manage lakectl plugins

Provides utilities for managing lakectl plugins.

\b
Plugins are standalone executable files that extend lakectl's functionality.
lakectl discovers plugins by looking for executables in your PATH
that are named with the prefix "lakectl-".

\b
For example, an executable named "lakectl-myfeature" can be invoked as
"lakectl myfeature [args...]".

\b
Plugin Naming:
  - The executable must start with "lakectl-".
  - The part after "lakectl-" becomes the command name users type.
    (e.g., "lakectl-foo" -> "lakectl foo")
  - The plugin name is used exactly as-is in the command.
    (e.g., "lakectl-foo-bar" -> "lakectl foo-bar")

\b
Execution:
  - When you run "lakectl some-plugin arg1 --flag", lakectl searches for
    "lakectl-some-plugin" in PATH and runs it with "arg1 --flag".
  - The plugin inherits environment variables from lakectl.
  - Standard output, standard error, and the exit code of the plugin are propagated.
  - Built-in lakectl commands always take precedence over plugins.

Use "lakectl plugin list" to see all detected plugins and any warnings.
"""


@dataclass(frozen=True)
class Plugin:
    name: str
    path: str


def _path_dirs() -> list[str]:
    """``PATH``'s directories in order, each once (an empty entry is ``.``)."""
    seen: list[str] = []
    for d in os.environ.get("PATH", "").split(os.pathsep):
        d = d or "."
        if d not in seen:
            seen.append(d)
    return seen


def _executable(path: str) -> bool:
    return bool(os.stat(path).st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))


def discover(warn: bool = False) -> list[Plugin]:
    """The plugins on ``PATH``, the first executable of each name, sorted by path.

    With ``warn``, says on stderr what was passed over and why.
    """
    def warning(text: str) -> None:
        if warn:
            click.echo(f"Warning: {text}", err=True)

    found: dict[str, Plugin] = {}
    for d in _path_dirs():
        try:
            names = sorted(os.listdir(d))
        except FileNotFoundError:
            continue
        except OSError as e:
            warning(f"reading directory {d} - {e.strerror}")
            continue
        for file_name in names:
            name = file_name[len(PREFIX):] if file_name.startswith(PREFIX) else ""
            if not name:
                continue
            path = os.path.abspath(os.path.join(d, file_name))
            if os.path.isdir(path):
                continue
            if not _executable(path):
                warning(f"{path} is not executable")
                continue
            if name in found:
                warning(f"found multiple executables for plugin {name}: "
                        f"{found[name].path} and {path}")
                continue
            found[name] = Plugin(name, path)
    return sorted(found.values(), key=lambda p: p.path)


def find(name: str) -> Plugin | None:
    """The plugin that ``lakectl <name>`` runs, if any."""
    return next((p for p in discover() if p.name == name), None)


def plugin_command(plugin: Plugin) -> click.Command:
    """A command that runs ``plugin`` with every argument after its name, untouched."""
    @click.command(plugin.name, add_help_option=False, context_settings={
        "ignore_unknown_options": True, "allow_extra_args": True,
        "allow_interspersed_args": False})
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def run(args: tuple[str, ...]) -> int:
        sys.stdout.flush()
        return subprocess.run([plugin.path, *args], check=False).returncode

    return run


@click.group(help=PLUGIN_HELP, short_help="Manage lakectl plugins")
def plugin() -> None:
    pass


@plugin.command("list")
@click.option("-v", "--verbose", is_flag=True, help="show full path for all plugins")
def list_(verbose: bool) -> None:
    """List available lakectl plugins

    Scans the PATH for executables named "lakectl-*" and lists the detected plugins.
    """
    lines = ["The following lakectl-compatible plugins are available:"]
    lines += [f"  {p.path if verbose else p.name}" for p in discover(warn=verbose)]
    click.echo("\n".join(lines))
