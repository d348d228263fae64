"""``lakectl completion bash|zsh|fish|powershell``: the shell script that completes
lakectl's commands and flags.

bash, zsh and fish use click's scripts; PowerShell has a completer of its own here,
:class:`PowerShellComplete`, registered with click under the name ``powershell``: its
script asks lakectl (``_LAKECTL_COMPLETE=powershell_complete``) for the completions
of the words typed so far.
"""

from __future__ import annotations

import os

import click
from click.shell_completion import (
    CompletionItem,
    ShellComplete,
    add_completion_class,
    get_completion_class,
    split_arg_string,
)

from lakectl.output import Fatal

SHELLS = ("bash", "zsh", "fish", "powershell")

_POWERSHELL_SOURCE = """\
Register-ArgumentCompleter -Native -CommandName %(prog_name)s -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)
    $line = $commandAst.ToString()
    if ($line.Length -gt $cursorPosition) { $line = $line.Substring(0, $cursorPosition) }
    $words = @($commandAst.CommandElements | ForEach-Object { $_.ToString() })
    $cword = $words.Count - 1
    if ($wordToComplete -eq '') { $cword = $words.Count }
    $env:COMP_WORDS = $line
    $env:COMP_CWORD = "$cword"
    $env:%(complete_var)s = 'powershell_complete'
    $completions = & %(prog_name)s 2>$null
    Remove-Item Env:%(complete_var)s, Env:COMP_WORDS, Env:COMP_CWORD
    foreach ($completion in $completions) {
        $kind, $value, $help = $completion -split "`t", 3
        if (-not $help) { $help = $value }
        [System.Management.Automation.CompletionResult]::new(
            $value, $value, 'ParameterValue', $help)
    }
}
"""


class PowerShellComplete(ShellComplete):
    """PowerShell completion: one ``type<TAB>value<TAB>help`` line per completion."""

    name = "powershell"
    source_template = _POWERSHELL_SOURCE

    def get_completion_args(self) -> tuple[list[str], str]:
        cwords = split_arg_string(os.environ.get("COMP_WORDS", ""))
        cword = int(os.environ.get("COMP_CWORD", len(cwords)))
        args = cwords[1:cword]
        incomplete = cwords[cword] if cword < len(cwords) else ""
        return args, incomplete

    def format_completion(self, item: CompletionItem) -> str:
        return f"{item.type}\t{item.value}\t{item.help or ''}"


add_completion_class(PowerShellComplete)


@click.command("completion")
@click.argument("shell", metavar="<bash|zsh|fish|powershell>", type=click.Choice(SHELLS))
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
    for PowerShell, add to your profile:
      lakectl completion powershell | Out-String | Invoke-Expression
    """
    root = ctx.find_root().command
    cls = get_completion_class(shell)
    if cls is None:  # pragma: no cover - every shell offered has a class
        raise Fatal(f"unsupported shell {shell}")
    click.echo(cls(root, {}, "lakectl", "_LAKECTL_COMPLETE").source())
