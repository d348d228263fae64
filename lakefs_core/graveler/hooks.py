"""The engine's hook points: what an operation tells the hooks before and after it runs.

The engine knows nothing of action files or webhooks: an operation builds a
:class:`HookRecord` and hands it to its :class:`HookHandler` (none by default) before
it changes anything (``pre``: the handler may refuse, and nothing is changed) and after
it succeeded (``post``: whatever the handler does, the operation stands).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from lakefs_core.events import EventType
from lakefs_core.graveler.model import Repository

__all__ = ["EventType", "HookHandler", "HookRecord", "NoHooks"]


@dataclass(frozen=True, slots=True)
class HookRecord:
    """One event of one operation.

    ``source_ref`` is the ref the action files are read from (a branch, so its staged
    changes count, or a commit id); ``commit_*`` describe the commit the operation
    makes or acts on, when there is one. ``acting_user`` is the id of the user whose
    request made the event (hooks act with that user's permissions); "" for the
    server's own events, such as the branch housekeeping's deletions.
    """

    event_type: EventType
    repository: Repository
    source_ref: str
    branch_id: str = ""
    tag_id: str = ""
    commit_id: str = ""
    commit_message: str = ""
    committer: str = ""
    commit_metadata: Mapping[str, str] = field(default_factory=dict)
    acting_user: str = ""


class HookHandler(Protocol):
    """What runs at the engine's hook points."""

    def pre(self, record: HookRecord) -> str:
        """Run the hooks of a ``pre-*`` event; the run's id ("" when nothing ran).

        Raises:
            PreconditionFailedError: a hook failed (or an action file is invalid):
                the operation must not go on.
        """

    def post(self, record: HookRecord, pre_run_id: str = "") -> None:
        """Run the hooks of a ``post-*`` event; never raises for a failed hook.

        ``pre_run_id`` is the run of the matching ``pre-*`` event, which learns the
        operation's commit id here.
        """


class NoHooks:
    """The handler of an engine that runs no hooks (a mirror's, a tool's)."""

    def pre(self, record: HookRecord) -> str:
        return ""

    def post(self, record: HookRecord, pre_run_id: str = "") -> None:
        return None
