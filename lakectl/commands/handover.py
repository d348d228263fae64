"""What lakectl's switchover and failback commands share, for one mirror (``mirror
switchover|failback``) and for a group (``mirror group switchover|failback``)."""

from __future__ import annotations

from typing import Any

import click

from lakectl import flags
from lakectl.output import output_option
from lakectl.session import Session, pass_session


def handover_options(name: str, metavar: str, waits_for: str) -> Any:
    """The arguments and options of a handover command: what it acts on (``name``),
    ``--timeout``, ``--yes`` and ``--output``."""
    def decorate(f: Any) -> Any:
        for option in reversed((
                click.argument(name, metavar=metavar),
                click.option("--timeout", "timeout", default="5m", show_default=True,
                             help=f"how long to wait for {waits_for} (e.g. 90s, 5m)"),
                flags.yes, output_option, pass_session)):
            f = option(f)
        return f
    return decorate


def send_handover(s: Session, path: str, action: str, timeout: str, assume_yes: bool,
                  question: str) -> dict[str, Any]:
    """Confirm, then send a switchover or failback to ``path`` and wait for its answer."""
    seconds = flags.parse_duration(timeout)
    flags.confirm(assume_yes, question, f"{action.capitalize()} aborted")
    result: dict[str, Any] = s.client.request(
        "POST", f"{path}/{action}", retry=False, json={"timeout_seconds": seconds},
        timeout=seconds + 120).json()
    return result


def phases_text(result: dict[str, Any]) -> str:
    """The time each phase of a handover took, a line each."""
    return "\n".join(f"  {p['phase']}: {p['seconds']:.3f}s" for p in result.get("phases", []))
