"""``lakectl completion bash|zsh|fish``: the shell script that completes lakectl's
commands and flags."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

from lakectl.output import Fatal

SHELLS = ("bash", "zsh", "fish")


@click.command("completion")
@click.argument("shell", metavar="[bash|zsh|fish]", type=click.Choice(SHELLS))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Generate completion script

    \b
    To load completions for bash, add to ~/.bashrc:
      source <(lakectl completion bash)
    for zsh, to ~/.zshrc:
      source <(lakectl completion zsh)
    for fish:
      lakectl completion fish | source
    """
    root = ctx.find_root().command
    cls = get_completion_class(shell)
    if cls is None:  # pragma: no cover - every shell offered has a class
        raise Fatal(f"unsupported shell {shell}")
    click.echo(cls(root, {}, "lakectl", "_LAKECTL_COMPLETE").source())
