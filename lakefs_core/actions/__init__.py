"""Actions and hooks: lakeFS's action files, run at the engine's hook points.

Above the engine (it reads the action files through it and records runs in its
refstore) and below the front doors, which serve the runs.

The names below are imported when first used, so that a Lua worker process
(:mod:`lakefs_core.actions.lua.worker`) loads none of the engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakefs_core.actions.action import (
        ACTIONS_PREFIX,
        Action,
        ActionHook,
        InvalidActionError,
        parse_action,
    )
    from lakefs_core.actions.alerting import HookAlerts
    from lakefs_core.actions.destinations import HookDestinations, networks
    from lakefs_core.actions.hook import HookEnvironment
    from lakefs_core.actions.lua.sandbox import LuaLimits
    from lakefs_core.actions.service import ActionsService, build_hook

_EXPORTS = {
    "ACTIONS_PREFIX": "lakefs_core.actions.action",
    "Action": "lakefs_core.actions.action",
    "ActionHook": "lakefs_core.actions.action",
    "ActionsService": "lakefs_core.actions.service",
    "HookAlerts": "lakefs_core.actions.alerting",
    "HookDestinations": "lakefs_core.actions.destinations",
    "HookEnvironment": "lakefs_core.actions.hook",
    "networks": "lakefs_core.actions.destinations",
    "InvalidActionError": "lakefs_core.actions.action",
    "build_hook": "lakefs_core.actions.service",
    "LuaLimits": "lakefs_core.actions.lua.sandbox",
    "parse_action": "lakefs_core.actions.action",
}

__all__ = [
    "ACTIONS_PREFIX",
    "Action",
    "ActionHook",
    "ActionsService",
    "HookAlerts",
    "HookDestinations",
    "HookEnvironment",
    "InvalidActionError",
    "build_hook",
    "LuaLimits",
    "networks",
    "parse_action",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
