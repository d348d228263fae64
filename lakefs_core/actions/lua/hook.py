"""The ``lua`` hook: a Lua script, run in a worker process, as lakeFS runs it.

Properties as lakeFS reads them: ``script`` (inline) or ``script_path`` (a path in the
repository, read from the event's source ref; ``script_file`` is its older name), and
``args`` (any value, the script's global ``args``). The script also sees ``action``
(the event, see :func:`action_table`) and may ``require`` the modules of
:mod:`lakefs_core.actions.lua.library` (``net/http`` only when ``actions.lua.
net_http_enabled`` is set), and ``lakefs``, whose calls the server answers with the
permissions of the user who made the event (:mod:`lakefs_core.actions.lua.engine`).
What it prints is the hook's output; an ``error()``, a timeout or running out of
memory fails the hook.

Scripts never run in the server process: a :class:`~lakefs_core.actions.lua.pool.
LuaWorkerPool` runs them in worker processes with hard CPU and memory limits and
none of the server's environment, and kills a worker at its run's deadline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakefs_core.actions.action import ActionHook
from lakefs_core.actions.hook import HookContext, HookFailedError, property_error
from lakefs_core.actions.lua.engine import HookAuthorizer, LakeFSModule
from lakefs_core.actions.lua.pool import LuaJob, LuaWorkerError, LuaWorkerPool
from lakefs_core.block.base import join_address
from lakefs_core.errors import LakeFSError
from lakefs_core.graveler.model import AddressType

__all__ = ["LuaHook", "LuaRunner", "action_table"]


@dataclass(frozen=True, slots=True)
class LuaRunner:
    """Where lua hooks run: the worker processes, and the users' permissions their
    ``lakefs`` calls are checked against (None: every call is refused)."""

    pool: LuaWorkerPool
    authorizer: HookAuthorizer | None = None


@dataclass(frozen=True, slots=True)
class LuaHook:
    action_name: str
    hook_id: str
    script: str = ""
    script_path: str = ""
    args: Any = None
    #: None for a hook only checked, never run (``build_hook`` without a service)
    runner: LuaRunner | None = None

    @classmethod
    def from_hook(cls, action_name: str, path: str, hook: ActionHook,
                  runner: LuaRunner | None = None) -> LuaHook:
        """Raises InvalidActionError for malformed properties."""
        props = hook.properties
        script = props.get("script")
        script_path = props.get("script_path", props.get("script_file"))
        if (script is None) == (script_path is None):
            raise property_error(path, hook, "script: either script or script_path "
                                             "must be given, not both")
        if script is not None and not isinstance(script, str):
            raise property_error(path, hook, "script: must be a string")
        if script_path is not None and (not isinstance(script_path, str) or not script_path):
            raise property_error(path, hook, "script_path: must be a path")
        return cls(action_name, hook.id, script or "", script_path or "",
                   props.get("args"), runner)

    def _source(self, ctx: HookContext) -> bytes:
        if not self.script_path:
            return self.script.encode()
        g, repo = ctx.graveler, ctx.record.repository
        try:
            entry = g.get_entry(repo.id, ctx.record.source_ref, self.script_path)
            address = (entry.address if entry.address_type is AddressType.FULL
                       else join_address(repo.storage_namespace, entry.address))
            return g.store_for(repo.storage_id).get(address)
        except LakeFSError as exc:
            raise HookFailedError(f"script_path {self.script_path}: {exc}") from None

    def run(self, ctx: HookContext) -> str:
        """Run the script; what it printed. Raises HookFailedError (output attached)."""
        if self.runner is None:
            raise HookFailedError("lua hooks do not run here")
        script = self._source(ctx)
        lakefs = LakeFSModule(ctx.graveler, ctx.record.repository, ctx.record.acting_user,
                              self.runner.authorizer)
        job = LuaJob(script, self.script_path or "lua", {
            "action": action_table(ctx), "args": self.args if self.args is not None else {}})
        try:
            result = self.runner.pool.run(job, lakefs.call)
        except LuaWorkerError as exc:
            raise HookFailedError(f"lua hook failed: {exc}") from None
        if result.error:
            raise HookFailedError(result.error, _output(result.output, result.error))
        return _output(result.output)


def _output(lines: list[str], error: str = "") -> str:
    return "".join(f"{line}\n" for line in [*lines, *([error] if error else [])])


def action_table(ctx: HookContext) -> Mapping[str, Any]:
    """The ``action`` global: lakeFS's event fields (empty ones left out)."""
    r = ctx.record
    table: dict[str, Any] = {
        "action_name": ctx.action.name, "hook_id": ctx.hook.id, "run_id": ctx.run_id,
        "event_type": r.event_type.value, "repository_id": r.repository.id,
        "storage_namespace": r.repository.storage_namespace, "branch_id": r.branch_id,
        "source_ref": r.source_ref, "tag_id": r.tag_id, "commit_id": r.commit_id,
        "commit": {"message": r.commit_message, "committer": r.committer,
                   "metadata": dict(r.commit_metadata)},
    }
    return {k: v for k, v in table.items() if v != ""}
