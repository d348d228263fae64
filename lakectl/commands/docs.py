"""``lakectl docs [outfile]``: the command reference in Markdown, made from the
commands themselves (lakeFS publishes its lakectl page this way)."""

from __future__ import annotations

import sys
from typing import TextIO

import click

HEADER = """\
---
layout: default
title: lakectl (lakeFS command-line tool)
description: The complete lakectl command reference.
parent: Reference
has_children: false
---

# lakectl (lakeFS command-line tool)
{:.no_toc}

{% include toc.html %}

lakectl reads its configuration from `$HOME/.lakectl.yaml` (`lakectl config` writes it)
and from `LAKECTL_*` variables: a key's variable is `LAKECTL_` and the key in capitals
with `_` for `.`, so `LAKECTL_SERVER_ENDPOINT_URL` sets `server.endpoint_url`.

## Command Reference
"""

PLUMBING_NOTE = ("**note:** This command is a lakeFS plumbing command. Don't use it unless "
                 "you're really sure you know what you're doing.\n{: .note .note-warning }\n\n")


def _options(ctx: click.Context) -> str:
    records = [r for p in ctx.command.get_params(ctx)
               if (r := p.get_help_record(ctx)) is not None]
    if not records:
        return ""
    formatter = ctx.make_formatter()
    formatter.write_dl(records)
    return "#### Options\n{:.no_toc}\n\n```\n" + formatter.getvalue() + "```\n\n"


def command_markdown(ctx: click.Context, out: TextIO) -> None:
    """The section of ``ctx``'s command, then of each of its subcommands."""
    cmd = ctx.command
    help_text = (cmd.help or "").strip()
    short, _, long = help_text.partition("\n")
    out.write(f"### {ctx.command_path}\n\n")
    if cmd.hidden:
        out.write(PLUMBING_NOTE)
    out.write(short.strip() + "\n\n")
    long = long.replace("\b\n", "").strip()
    if long:
        out.write("#### Synopsis\n{:.no_toc}\n\n" + long + "\n\n")
    if not isinstance(cmd, click.Group) or cmd.invoke_without_command:
        pieces = " ".join(cmd.collect_usage_pieces(ctx))
        out.write(f"```\n{ctx.command_path} {pieces}\n```\n\n")
    out.write(_options(ctx) + "\n\n")
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None:
                command_markdown(click.Context(sub, info_name=name, parent=ctx), out)


@click.command("docs", hidden=True)
@click.argument("outfile", required=False, type=click.Path(dir_okay=False))
@click.pass_context
def docs(ctx: click.Context, outfile: str | None) -> None:
    """Generate the command reference in Markdown (to stdout, or to outfile)"""
    root = ctx.find_root()
    out = open(outfile, "w") if outfile else sys.stdout  # noqa: SIM115 - closed below
    try:
        out.write(HEADER)
        command_markdown(click.Context(root.command, info_name="lakectl"), out)
    finally:
        if outfile:
            out.close()
