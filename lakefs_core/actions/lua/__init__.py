"""The ``lua`` hook: a Lua script run in-process, as lakeFS runs it.

Properties as lakeFS reads them: ``script`` (inline) or ``script_path`` (a path in the
repository, read from the event's source ref; ``script_file`` is its older name), and
``args`` (any value, the script's global ``args``). The script also sees ``action``
(the event, see :func:`action_table`) and may ``require`` the modules of
:mod:`lakefs_core.actions.lua.library` (``net/http`` only when ``actions.lua.
net_http_enabled`` is set). What it prints is the hook's output; an
``error()``, a timeout or running out of memory fails the hook.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lupa import lua52

from lakefs_core.actions.action import ActionHook
from lakefs_core.actions.hook import HookContext, HookFailedError, property_error
from lakefs_core.actions.lua.library import HOOK_FAILURE, MODULES, LakeFSModule, net_http
from lakefs_core.actions.lua.sandbox import LuaLimits, LuaSandbox, LuaTimeoutError
from lakefs_core.block.base import join_address
from lakefs_core.errors import LakeFSError
from lakefs_core.graveler.model import AddressType

__all__ = ["LuaHook", "LuaLimits", "action_table"]


@dataclass(frozen=True, slots=True)
class LuaHook:
    action_name: str
    hook_id: str
    script: str = ""
    script_path: str = ""
    args: Any = None
    limits: LuaLimits = field(default_factory=LuaLimits)

    @classmethod
    def from_hook(cls, action_name: str, path: str, hook: ActionHook,
                  limits: LuaLimits | None = None) -> LuaHook:
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
                   props.get("args"), limits or LuaLimits())

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
        script = self._source(ctx)
        lakefs = LakeFSModule(ctx.graveler, ctx.record.repository)
        extra = {"net/http": net_http} if self.limits.net_http else {}
        sandbox = LuaSandbox(self.limits, {**MODULES, "lakefs": lakefs.module, **extra})
        try:
            sandbox.set_global("action", action_table(ctx))
            sandbox.set_global("args", self.args if self.args is not None else {})
            sandbox.run(script, chunk_name=self.script_path or "lua")
        except LuaTimeoutError as exc:
            raise HookFailedError(str(exc), _output(sandbox, str(exc))) from None
        except lua52.LuaMemoryError:
            message = (f"lua hook ran out of memory (limit "
                       f"{self.limits.max_memory >> 20} MiB)")
            raise HookFailedError(message, _output(sandbox, message)) from None
        except lua52.LuaError as exc:
            failure = HOOK_FAILURE.search(str(exc))
            # hook.fail(message): the hook fails with that message as it is
            message = failure.group(1) if failure else \
                f"lua error: {exc}".split("\nstack traceback:")[0]
            raise HookFailedError(message, _output(sandbox, message)) from None
        except Exception as exc:  # noqa: BLE001 - a library call that failed outside Lua
            message = f"lua hook failed: {exc}"
            raise HookFailedError(message, _output(sandbox, message)) from None
        return _output(sandbox)


def _output(sandbox: LuaSandbox, error: str = "") -> str:
    lines = [*sandbox.output, *([error] if error else [])]
    return "".join(f"{line}\n" for line in lines)


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
